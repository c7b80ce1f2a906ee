"""SONiC's gNMI schema as sonic-gnmi serves it: Redis tables as paths, values as strings.

A SONiC-shaped switch answers the DB targets of sonic-gnmi (``sonic_data_client``):

* ``COUNTERS_DB`` ``COUNTERS/<port>[/<field>]``: the port's ``SAI_PORT_STAT_*`` hash. The port
  element ending in ``*`` is sonic-gnmi's virtual path for *every* port (``v2rEthPortStats``
  tests ``HasSuffix(key, "*")``, not the ``Ethernet`` spelling), answered as ONE Update at the
  requested path whose ``json_ietf_val`` is ``{"<port>": {"SAI_...": "123", ...}, ...}``; one
  port answers ``{"SAI_...": "123", ...}`` at ``COUNTERS/<port>``, and one named field a
  ``string_val`` at ``COUNTERS/<port>/<field>``. A field ending in ``*`` matches by prefix.
  Numbers are decimal strings (Redis hash fields), never ``uint_val``. Per-priority PFC is
  ``SAI_PORT_STAT_PFC_<p>_RX_PKTS`` (pause frames received) and ``_TX_PKTS`` (sent).
* ``APPL_DB`` ``PORT_TABLE[/<port>[/<field>]]``: ``oper_status``/``admin_status`` ``up``/
  ``down``, ``speed`` in Mb/s, ``mtu``, ``alias``, ``index``, ``description``;
  ``LLDP_ENTRY_TABLE[/<port>[/<field>]]``: ``lldp_rem_*`` of the port's one neighbour (what
  lldp_syncd writes). Each key is one Update (``PORT_TABLE/<port>``, a JSON object), all keys
  of one instant in one Notification; a key that goes away is a ``delete`` of its path.

The prefix of every answer carries only the target (the DB name). Port names are the
simulated fabric's (``swp1``, as on a SONiC switch whose ports carry vendor aliases), so the
collector's rows line up with the inventory. Only the stats fabricmon reads are served, plus
two constant ones (``SAI_PORT_STAT_IF_IN_UNKNOWN_PROTOS``, ``SAI_PORT_STAT_IF_OUT_QLEN``) so a
whole-port answer carries fields a collector must skip; a real switch has ~100. A whole hash
(``COUNTERS/<port|glob>``) also carries the port's FEC fields
(``SAI_PORT_STAT_IF_IN_FEC_CODEWORD_ERRORS_S0..S15``, ``_CORRECTABLE_FRAMES``,
``_NOT_CORRECTABLE_FRAMES``, ``_SYMBOL_ERRORS``), as orchagent's port counters put them in the
same hash (sonic-net/SONiC ``doc/port_fec_flr``), after the others. COUNTERS_DB
has no last-clear or carrier-transition count. Values are JSON whatever encoding is asked for
(sonic-gnmi answers DB paths as JSON_IETF).

Sources: sonic-net/SONiC ``doc/system-telemetry/grpc_telemetry.md``; the sonic-gnmi test data
in ``../shared/fixtures/gnmi/sonic-gnmi/`` (``COUNTERS__Ethernet68.txt``,
``COUNTERS__Ethernet_wildcard_expected.txt``, ``LLDP_ENTRY_TABLE_UPDATE.txt``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

from simulator.gnmi_optics import SONIC_FIELDS, SONIC_TABLES, STATE_DB
from simulator.gnmi_paths import (
    IF_FIELDS,
    PFC_PRIORITIES,
    Elem,
    Family,
    Kind,
    Leaf,
    PathError,
    Selection,
    UnknownPathError,
)
from simulator.gnmi_wire import Group, JsonTexts, json_ietf, path_bytes, prefix_field, string_val, update_field
from simulator.view import LldpNeighbor, PortCounters
from wire.protobuf import U64_MAX

_MAX_MEMO = 200_000
_MTU = 9100


@dataclass(frozen=True, slots=True)
class SonicField:
    """One field of a SONiC table: how to read it from a row, or its constant JSON text."""

    name: str
    read: Callable[[Any], Any] | None = None  # from a row of the table (None: see column, const)
    number: bool = False  # an int sent as a decimal string ("123")
    const: bytes = b""  # the JSON text of a constant field
    column: int = -1  # COUNTERS: the column of the counters row (the hot path reads columns)

    @property
    def live(self) -> bool:
        """Whether the value comes from the switch (not a constant)."""
        return self.read is not None or self.column >= 0


def _counter(name: str, column: int) -> SonicField:
    return SonicField(name, number=True, column=column)


_IF = {name: i for i, name in enumerate(IF_FIELDS)}
_PFC = len(IF_FIELDS)  # the counters row is the interfaces row, then pfc_rx, then pfc_tx

_COUNTERS: tuple[SonicField, ...] = (
    _counter("SAI_PORT_STAT_IF_IN_OCTETS", _IF["in_octets"]),
    _counter("SAI_PORT_STAT_IF_OUT_OCTETS", _IF["out_octets"]),
    _counter("SAI_PORT_STAT_IF_IN_UCAST_PKTS", _IF["in_unicast_pkts"]),
    _counter("SAI_PORT_STAT_IF_OUT_UCAST_PKTS", _IF["out_unicast_pkts"]),
    _counter("SAI_PORT_STAT_IF_IN_MULTICAST_PKTS", _IF["in_multicast_pkts"]),
    _counter("SAI_PORT_STAT_IF_OUT_MULTICAST_PKTS", _IF["out_multicast_pkts"]),
    _counter("SAI_PORT_STAT_IF_IN_BROADCAST_PKTS", _IF["in_broadcast_pkts"]),
    _counter("SAI_PORT_STAT_IF_OUT_BROADCAST_PKTS", _IF["out_broadcast_pkts"]),
    _counter("SAI_PORT_STAT_IF_IN_ERRORS", _IF["in_errors"]),
    _counter("SAI_PORT_STAT_IF_OUT_ERRORS", _IF["out_errors"]),
    _counter("SAI_PORT_STAT_IF_IN_DISCARDS", _IF["in_discards"]),
    _counter("SAI_PORT_STAT_IF_OUT_DISCARDS", _IF["out_discards"]),
    _counter("SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS", _IF["in_fcs_errors"]),
    _counter("SAI_PORT_STAT_PAUSE_RX_PKTS", _IF["in_pause_frames"]),
    _counter("SAI_PORT_STAT_PAUSE_TX_PKTS", _IF["out_pause_frames"]),
    *(_counter(f"SAI_PORT_STAT_PFC_{p}_RX_PKTS", _PFC + p) for p in range(PFC_PRIORITIES)),
    *(_counter(f"SAI_PORT_STAT_PFC_{p}_TX_PKTS", _PFC + PFC_PRIORITIES + p) for p in range(PFC_PRIORITIES)),
    SonicField("SAI_PORT_STAT_IF_IN_UNKNOWN_PROTOS", const=b'"0"'),
    SonicField("SAI_PORT_STAT_IF_OUT_QLEN", const=b'"0"'),
)


def _up(flag: bool) -> bytes:
    return b'"up"' if flag else b'"down"'


_PORTS: tuple[SonicField, ...] = (
    SonicField("admin_status", lambda p: _up(p.admin_up)),
    SonicField("alias", lambda p: p.name, number=False),
    SonicField("description", attrgetter("description")),
    SonicField("index", attrgetter("if_index"), number=True),
    SonicField("mtu", const=b'"%d"' % _MTU),
    SonicField("oper_status", lambda p: _up(p.oper_up)),
    SonicField("speed", lambda p: p.speed_bps // 1_000_000, number=True),  # Mb/s
)

_LLDP: tuple[SonicField, ...] = (
    SonicField("lldp_rem_chassis_id", attrgetter("chassis_id")),
    SonicField("lldp_rem_chassis_id_subtype", const=b'"4"'),  # macAddress (LLDP-MIB)
    SonicField("lldp_rem_index", const=b'"1"'),
    SonicField("lldp_rem_port_desc", attrgetter("port_description")),
    SonicField("lldp_rem_port_id", attrgetter("port_id")),
    SonicField("lldp_rem_port_id_subtype", attrgetter("port_id_subtype"), number=True),  # LldpPortIdSubtype
    SonicField("lldp_rem_sys_name", attrgetter("system_name")),
)

#: Each table's fields, in the (sorted) order sonic-gnmi's JSON has them.
FIELDS: dict[Family, tuple[SonicField, ...]] = {
    Family.SONIC_COUNTERS: tuple(sorted(_COUNTERS, key=attrgetter("name"))),
    Family.SONIC_PORTS: _PORTS,
    Family.SONIC_LLDP: _LLDP,
}
#: The table name behind each family.
TABLES: dict[Family, str] = {
    Family.SONIC_COUNTERS: "COUNTERS",
    Family.SONIC_PORTS: "PORT_TABLE",
    Family.SONIC_LLDP: "LLDP_ENTRY_TABLE",
}
#: The tables of each DB target.
DATABASES: dict[str, dict[str, Family]] = {
    "COUNTERS_DB": {"COUNTERS": Family.SONIC_COUNTERS},
    "APPL_DB": {"PORT_TABLE": Family.SONIC_PORTS, "LLDP_ENTRY_TABLE": Family.SONIC_LLDP},
}
_ON_CHANGE = {Family.SONIC_COUNTERS: False, Family.SONIC_PORTS: True, Family.SONIC_LLDP: True}

#: The leaf tables of the SONiC families (what plans read: ON_CHANGE or SAMPLE per field).
SONIC_LEAVES: dict[Family, tuple[Leaf, ...]] = {
    fam: tuple(
        Leaf((Elem(f.name),), Kind.UINT if f.number else Kind.TEXT, i, _ON_CHANGE[fam]) for i, f in enumerate(fields)
    )
    for fam, fields in FIELDS.items()
}


def select_sonic(db: str, elems: Sequence[Elem]) -> list[Selection]:
    """What a request path selects in a DB target (PathError / UnknownPathError as for OpenConfig).

    Link health (simulator.gnmi_optics): ``STATE_DB`` has the transceiver DOM tables, and a
    ``COUNTERS`` path naming FEC fields (``.../SAI_PORT_STAT_IF_IN_FEC_*``) selects them.
    """
    tables = DATABASES.get(db) or ({} if db != "STATE_DB" else STATE_DB)
    if not tables:
        raise UnknownPathError(f"target {db!r} is not served (SONiC targets: {', '.join(DATABASES)}, STATE_DB)")
    if any(e.keys for e in elems):
        raise PathError("SONiC DB paths have no keys: TABLE/KEY/FIELD, e.g. COUNTERS/Ethernet*/<SAI name>")
    names = [e.name for e in elems]
    if db == "STATE_DB" or (names[:1] == ["COUNTERS"] and len(names) == 3):
        return _select_optics(tables, names)
    if not names or names[0] not in tables or len(names) > 3:
        raise UnknownPathError(f"{db} serves {', '.join(tables)} (as TABLE[/KEY[/FIELD]]), not {'/'.join(names)!r}")
    family = tables[names[0]]
    if family is Family.SONIC_COUNTERS and len(names) < 2:
        raise UnknownPathError("COUNTERS is keyed by SAI object id: ask for COUNTERS/Ethernet* or COUNTERS/<port>")
    port: str | None = None
    glob: str | None = None
    if len(names) >= 2:
        if names[1].endswith("*"):
            glob = names[1]
        else:
            port = names[1]
    fields = FIELDS[family]
    leaves = tuple(range(len(fields)))
    if len(names) == 3:
        want = names[2]
        if want.endswith("*"):
            leaves = tuple(i for i, f in enumerate(fields) if f.name.startswith(want[:-1]))
        else:
            leaves = tuple(i for i, f in enumerate(fields) if f.name == want)
        if not leaves:
            raise UnknownPathError(f"{names[0]} has no field {want!r}")
    return [Selection(family, leaves, port, None, glob)]


def _select_optics(tables: dict[str, Family], names: list[str]) -> list[Selection]:
    """STATE_DB DOM tables, and COUNTERS paths that name a field (FEC fields, the others, or both)."""
    if not names or names[0] not in tables or len(names) > 3:
        raise UnknownPathError(f"served tables: {', '.join(tables)} (as TABLE[/KEY[/FIELD]]), not {'/'.join(names)!r}")
    port = names[1] if len(names) >= 2 and not names[1].endswith("*") else None
    glob = names[1] if len(names) >= 2 and names[1].endswith("*") else None
    families = [tables[names[0]]]
    if families[0] is Family.SONIC_COUNTERS:
        families.append(Family.SONIC_FEC)
    out: list[Selection] = []
    for family in families:
        fields = [f.name for f in FIELDS[family]] if family in FIELDS else list(SONIC_FIELDS[family])
        leaves = tuple(range(len(fields)))
        if len(names) == 3:
            want = names[2]
            stem = want[:-1] if want.endswith("*") else None
            leaves = tuple(i for i, f in enumerate(fields) if (f.startswith(stem) if stem is not None else f == want))
        if leaves:
            out.append(Selection(family, leaves, port, None, glob))
    if not out:
        raise UnknownPathError(f"{names[0]} has no field {names[-1]!r}")
    return out


@dataclass(frozen=True, slots=True)
class _Template:
    """A selection's JSON object as ``fmt % values(row)``; ``single``: the one field asked for."""

    fmt: bytes
    values: Callable[[Any], tuple[Any, ...]]
    single: SonicField | None


class SonicRenderer:
    """SONiC answers as Notification groups; owns its caches (one per server)."""

    def __init__(self) -> None:
        self._templates: dict[tuple[Family, tuple[int, ...]], _Template] = {}
        self._prefixes: dict[str, bytes] = {}
        self._paths: dict[tuple[str, ...], bytes] = {}
        self._text = JsonTexts()

    def prefix(self, db: str) -> bytes:
        """The prefix field of a DB target's Notifications (target only)."""
        found = self._prefixes.get(db)
        if found is None:
            found = self._prefixes[db] = prefix_field(path_bytes((), db))
        return found

    def path(self, *names: str) -> bytes:
        """Serialized Path bytes of ``TABLE/KEY/...`` (cached)."""
        found = self._paths.get(names)
        if found is None:
            if len(self._paths) >= _MAX_MEMO:
                self._paths.clear()
            found = self._paths[names] = path_bytes([Elem(n) for n in names])
        return found

    def delete(self, db: str, family: Family, port: str) -> tuple[bytes, bytes]:
        """(prefix field, Path bytes) deleting ``port``'s key from the family's table."""
        return self.prefix(db), self.path(TABLES.get(family) or SONIC_TABLES[family], port)

    def render(
        self,
        db: str,
        sel: Selection,
        ports: Sequence[PortCounters],
        lldp: Sequence[LldpNeighbor],
        fec: Mapping[str, bytes] | None = None,
    ) -> list[Group]:
        """The groups answering one selection (see the module docstring for the forms); ``fec``:
        each port's FEC fields as JSON members, added to a whole ``COUNTERS`` hash."""
        tpl = self._template(sel)
        fmt, values = tpl.fmt, tpl.values

        def hash_text(name: str, r: Any) -> bytes:
            return fmt % values(r)

        if fec and sel.family is Family.SONIC_COUNTERS and len(sel.leaves) == len(FIELDS[sel.family]):

            def hash_text(name: str, r: Any) -> bytes:  # the FEC members after the others
                extra = fec.get(name)
                return fmt % values(r) if extra is None else (fmt % values(r))[:-1] + b"," + extra + b"}"

        table = TABLES[sel.family]
        if sel.family is Family.SONIC_LLDP:
            first: dict[str, LldpNeighbor] = {}
            for nb in lldp:
                first.setdefault(nb.local_port, nb)
            rows: list[tuple[str, Any]] = sorted(first.items())
        elif sel.family is Family.SONIC_COUNTERS:
            row = _counters_row
            rows = [(p.name, row(p)) for p in ports]
        else:
            rows = [(p.name, p) for p in ports]
        if sel.port is not None:
            rows = [r for r in rows if r[0] == sel.port]
        prefix = self.prefix(db)
        leaf = () if tpl.single is None else (tpl.single.name,)
        if sel.port is None and sel.family is Family.SONIC_COUNTERS:
            if not rows:
                return []
            text = self._text
            rows.sort(key=itemgetter(0))  # Go's encoding/json sorts map keys
            doc = b"{" + b",".join(text(name) + b":" + hash_text(name, r) for name, r in rows) + b"}"
            key = self.path(table, sel.glob or "Ethernet*", *leaf)
            return [Group("", prefix, (key,), [update_field(key, json_ietf(doc))])]
        groups: list[Group] = []
        for name, r in rows:
            key = self.path(table, name, *leaf)
            single = tpl.single
            value = json_ietf(hash_text(name, r)) if single is None else string_val(self._raw(single, r))
            groups.append(Group(name, prefix, (key,), [update_field(key, value)]))
        return groups

    def _template(self, sel: Selection) -> _Template:
        key = (sel.family, sel.leaves)
        found = self._templates.get(key)
        if found is None:
            fields = FIELDS[sel.family]
            chosen = [fields[i] for i in sel.leaves]
            parts = [b'"%s":%s' % (f.name.encode(), f.const or (b'"%d"' if f.number else b"%s")) for f in chosen]
            live = [f for f in chosen if f.live]
            fmt = b"{" + b",".join(parts) + b"}"
            values: Callable[[Any], tuple[Any, ...]]
            if sel.family is not Family.SONIC_COUNTERS:
                values = self._reader(live)
            elif not live:
                values = _nothing
            elif len(live) == 1:
                values = _one(itemgetter(live[0].column))
            else:
                values = itemgetter(*(f.column for f in live))
            single = chosen[0] if len(chosen) == 1 else None
            found = self._templates[key] = _Template(fmt, values, single)
        return found

    def _reader(self, live: list[SonicField]) -> Callable[[Any], tuple[Any, ...]]:
        text = self._text

        def values(row: Any) -> tuple[Any, ...]:
            out: list[Any] = []
            for f in live:
                assert f.read is not None
                v = f.read(row)
                out.append(v if f.number or isinstance(v, bytes) else text(str(v)))
            return tuple(out)

        return values

    @staticmethod
    def _raw(field: SonicField, row: Any) -> bytes:
        """A field's value as the plain text of a ``string_val`` (one field asked for)."""
        if not field.live:
            return field.const.strip(b'"')
        v = row[field.column] if field.read is None else field.read(row)
        if isinstance(v, bytes):
            return v.strip(b'"')
        return b"%d" % (v & U64_MAX) if field.number else str(v).encode()


def _nothing(row: Any) -> tuple[Any, ...]:
    return ()


def _one(getter: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    def values(row: Any) -> tuple[Any, ...]:
        return (getter(row),)

    return values


_IF_ROW = attrgetter(*IF_FIELDS)


def _counters_row(p: PortCounters) -> tuple[int, ...]:
    row: tuple[int, ...] = _IF_ROW(p) + p.pfc_rx + p.pfc_tx
    return row
