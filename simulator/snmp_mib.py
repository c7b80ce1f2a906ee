"""The SNMP MIB view of one simulated switch: numeric OIDs, ordered, evaluated from a FabricView.

The objects served are data (:data:`OBJECTS`): scalars, and tables whose columns each name a
BER syntax and a getter over one row. A :class:`SwitchMib` binds them to one switch at one
instant (one ``view.ports()`` call), so a walk answered from it sees consistent values; rows
are built lazily per table and GETNEXT is a bisect over the object bases, the column numbers
and the sorted row indexes (no per-OID objects are kept). :class:`MibCache` keeps a switch's
snapshot for a short time so the many requests of one bulk walk share it.

What is served (all numeric; ifIndex is ``PortCounters.if_index``):

* SNMPv2-MIB system: sysDescr, sysObjectID (under the RFC 5612 documentation enterprise
  32473), sysUpTime (centiseconds since ``boot_time_ns``, mod 2^32), sysName.
* IF-MIB: ifNumber; ifTable (Counter32 columns wrap mod 2^32; ifSpeed is a Gauge32 capped at
  4294967295; ifLastChange is sysUpTime at the last oper change, 0 if before boot;
  ifOperStatus is notPresent(6) while the port's optic is pulled); ifXTable
  (Counter64 HC columns, ifHighSpeed in Mb/s, ifAlias, ifCounterDiscontinuityTime).
* EtherLike-MIB: dot3StatsFCSErrors; dot3PauseTable in/out pause frames (32 and 64 bit).
* LLDP-MIB: lldpLocSysName, lldpLocPortTable (lldpLocPortNum = ifIndex), and lldpRemTable
  indexed ``timeMark.localPortNum.remIndex`` with timeMark 0 (entries never age here) and
  remIndex counting from 1 per local port. A chassis id written as a MAC (``aa:bb:..``) is
  served as subtype macAddress(4) with 6 octets, anything else as local(7) with its text;
  port ids are interfaceName(5).
* IEEE8021-PFC-MIB ieee8021PfcIfTable (AUGMENTS ifEntry, so index ifIndex): Counter32
  totals over priorities. ``ieee8021PfcRequests`` (.2) counts PFC M_CONTROL.request
  primitives, i.e. pause frames this port SENT (``pfc_tx``); ``ieee8021PfcIndications``
  (.3) counts M_CONTROL.indication primitives, i.e. pause frames RECEIVED (``pfc_rx``).
* CISCO-PFC-EXT-MIB, same request = sent / indication = received semantics, Counter64:
  cpfcIfTable (1.3.6.1.4.1.9.9.813.1.1.1, index ifIndex: cpfcIfRequests .1,
  cpfcIfIndications .2) and cpfcIfPriorityTable (.813.1.2.1, index ifIndex.priority with
  priority 0..7 as cpfcIfPriorityValue: cpfcIfPriorityRequests .2,
  cpfcIfPriorityIndications .3).
* ENTITY-MIB entPhysicalTable, entAliasMappingTable and entLastChangeTime, ENTITY-SENSOR-MIB
  entPhySensorTable: ports, their transceivers and DOM sensors (:mod:`simulator.snmp_entity`), read from the
  view's ``transceivers`` at the snapshot's instant, only when one of those tables is walked.
"""

from __future__ import annotations

import re
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from simulator import snmp_entity
from simulator.snmp_ber import (
    COUNTER32,
    COUNTER64,
    GAUGE32,
    INTEGER,
    OBJECT_IDENTIFIER,
    OCTET_STRING,
    OID,
    TIMETICKS,
    encode_oid,
    encode_oid_arcs,
    encode_oid_content,
    encode_value,
    tlv,
)
from simulator.snmp_tables import Column, MibContext, Scalar, Table, Value
from simulator.view import (
    LLDP_PORT_IFNAME,
    LLDP_PORT_LOCAL,
    LLDP_PORT_MAC,
    PFC_PRIORITIES,
    FabricView,
    LldpNeighbor,
    PortCounters,
    SwitchInfo,
)

#: sysObjectID of every simulated switch: an OID under the documentation enterprise (RFC 5612).
SYS_OBJECT_ID: OID = (1, 3, 6, 1, 4, 1, 32473, 1, 1)
IF_MTU = 9216
IF_TYPE_ETHERNET = 6  # ethernetCsmacd
LLDP_CHASSIS_MAC, LLDP_CHASSIS_LOCAL = 4, 7
_TRUE, _FALSE = 1, 2  # SNMPv2-TC TruthValue
_MAC = re.compile(r"^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$")


def _text(s: str) -> bytes:
    return s.encode("utf-8", "replace")


def _local_port(p: PortCounters, c: MibContext) -> tuple[int, bytes, bytes]:
    """(lldpLocPortIdSubtype, lldpLocPortId, lldpLocPortDesc) of a port, as its NOS sends them.

    Junos: a locally assigned id (the ifIndex) and the interface name as the description;
    the others: the interface name, and the description the port carries.
    """
    if c.info.nos == "junos":
        return LLDP_PORT_LOCAL, _text(str(p.if_index)), _text(p.name)
    return LLDP_PORT_IFNAME, _text(p.name), _text(p.description)


def _port_id(n: LldpNeighbor) -> bytes:
    """lldpRemPortId: six octets for a MAC port id, the text otherwise."""
    if n.port_id_subtype == LLDP_PORT_MAC and _MAC.match(n.port_id):
        return bytes(int(h, 16) for h in re.split("[:-]", n.port_id))
    return _text(n.port_id)


def _chassis(n: LldpNeighbor) -> tuple[int, bytes]:
    if _MAC.match(n.chassis_id):
        return LLDP_CHASSIS_MAC, bytes(int(h, 16) for h in re.split("[:-]", n.chassis_id))
    return LLDP_CHASSIS_LOCAL, _text(n.chassis_id)


def _lldp_rows(ctx: MibContext) -> list[tuple[OID, Any]]:
    seen: dict[int, int] = {}
    rows: list[tuple[OID, Any]] = []
    for n in ctx.lldp:
        rem = seen[n.local_if_index] = seen.get(n.local_if_index, 0) + 1
        rows.append(((0, n.local_if_index, rem), n))
    return sorted(rows, key=lambda r: r[0])


def _pfc_priority_rows(ctx: MibContext) -> list[tuple[OID, Any]]:
    return [((idx[0], prio), (p, prio)) for idx, p in ctx.port_rows() for prio in range(PFC_PRIORITIES)]


def _port_rows(ctx: MibContext) -> list[tuple[OID, Any]]:
    return ctx.port_rows()


_C = Column
_IF_ENTRY = (1, 3, 6, 1, 2, 1, 2, 2, 1)
_IFX_ENTRY = (1, 3, 6, 1, 2, 1, 31, 1, 1, 1)

_DEFINITIONS: tuple[Scalar | Table, ...] = (
    Scalar("sysDescr", (1, 3, 6, 1, 2, 1, 1, 1), OCTET_STRING,
           lambda c: _text(f"fabricmon simulated {c.info.role} switch {c.info.name}")),
    Scalar("sysObjectID", (1, 3, 6, 1, 2, 1, 1, 2), OBJECT_IDENTIFIER, lambda c: SYS_OBJECT_ID),
    Scalar("sysUpTime", (1, 3, 6, 1, 2, 1, 1, 3), TIMETICKS, lambda c: c.ticks_since_boot(c.now_ns)),
    Scalar("sysName", (1, 3, 6, 1, 2, 1, 1, 5), OCTET_STRING, lambda c: _text(c.info.name)),
    Scalar("ifNumber", (1, 3, 6, 1, 2, 1, 2, 1), INTEGER, lambda c: len(c.port_rows())),
    Table("ifTable", _IF_ENTRY, (
        _C(1, "ifIndex", INTEGER, lambda p, c: p.if_index),
        _C(2, "ifDescr", OCTET_STRING, lambda p, c: _text(p.name)),
        _C(3, "ifType", INTEGER, lambda p, c: IF_TYPE_ETHERNET),
        _C(4, "ifMtu", INTEGER, lambda p, c: IF_MTU),
        _C(5, "ifSpeed", GAUGE32, lambda p, c: p.speed_bps),
        _C(7, "ifAdminStatus", INTEGER, lambda p, c: 1 if p.admin_up else 2),
        _C(8, "ifOperStatus", INTEGER, lambda p, c: 1 if p.oper_up else 2 if p.present else 6),
        _C(9, "ifLastChange", TIMETICKS, lambda p, c: c.ticks_since_boot(p.last_change_ns)),
        _C(10, "ifInOctets", COUNTER32, lambda p, c: p.in_octets),
        _C(11, "ifInUcastPkts", COUNTER32, lambda p, c: p.in_unicast_pkts),
        _C(12, "ifInNUcastPkts", COUNTER32, lambda p, c: p.in_multicast_pkts + p.in_broadcast_pkts),
        _C(13, "ifInDiscards", COUNTER32, lambda p, c: p.in_discards),
        _C(14, "ifInErrors", COUNTER32, lambda p, c: p.in_errors),
        _C(16, "ifOutOctets", COUNTER32, lambda p, c: p.out_octets),
        _C(17, "ifOutUcastPkts", COUNTER32, lambda p, c: p.out_unicast_pkts),
        _C(18, "ifOutNUcastPkts", COUNTER32, lambda p, c: p.out_multicast_pkts + p.out_broadcast_pkts),
        _C(19, "ifOutDiscards", COUNTER32, lambda p, c: p.out_discards),
        _C(20, "ifOutErrors", COUNTER32, lambda p, c: p.out_errors),
    ), _port_rows),
    Table("ifXTable", _IFX_ENTRY, (
        _C(1, "ifName", OCTET_STRING, lambda p, c: _text(p.name)),
        _C(2, "ifInMulticastPkts", COUNTER32, lambda p, c: p.in_multicast_pkts),
        _C(3, "ifInBroadcastPkts", COUNTER32, lambda p, c: p.in_broadcast_pkts),
        _C(4, "ifOutMulticastPkts", COUNTER32, lambda p, c: p.out_multicast_pkts),
        _C(5, "ifOutBroadcastPkts", COUNTER32, lambda p, c: p.out_broadcast_pkts),
        _C(6, "ifHCInOctets", COUNTER64, lambda p, c: p.in_octets),
        _C(7, "ifHCInUcastPkts", COUNTER64, lambda p, c: p.in_unicast_pkts),
        _C(8, "ifHCInMulticastPkts", COUNTER64, lambda p, c: p.in_multicast_pkts),
        _C(9, "ifHCInBroadcastPkts", COUNTER64, lambda p, c: p.in_broadcast_pkts),
        _C(10, "ifHCOutOctets", COUNTER64, lambda p, c: p.out_octets),
        _C(11, "ifHCOutUcastPkts", COUNTER64, lambda p, c: p.out_unicast_pkts),
        _C(12, "ifHCOutMulticastPkts", COUNTER64, lambda p, c: p.out_multicast_pkts),
        _C(13, "ifHCOutBroadcastPkts", COUNTER64, lambda p, c: p.out_broadcast_pkts),
        _C(14, "ifLinkUpDownTrapEnable", INTEGER, lambda p, c: 1),
        _C(15, "ifHighSpeed", GAUGE32, lambda p, c: p.speed_bps // 1_000_000),
        _C(16, "ifPromiscuousMode", INTEGER, lambda p, c: _FALSE),
        _C(17, "ifConnectorPresent", INTEGER, lambda p, c: _TRUE),
        _C(18, "ifAlias", OCTET_STRING, lambda p, c: _text(p.description)),
        _C(19, "ifCounterDiscontinuityTime", TIMETICKS, lambda p, c: c.ticks_since_boot(p.last_clear_ns)),
    ), _port_rows),
    Table("dot3StatsTable", (1, 3, 6, 1, 2, 1, 10, 7, 2, 1), (
        _C(1, "dot3StatsIndex", INTEGER, lambda p, c: p.if_index),
        _C(3, "dot3StatsFCSErrors", COUNTER32, lambda p, c: p.in_fcs_errors),
    ), _port_rows),
    Table("dot3PauseTable", (1, 3, 6, 1, 2, 1, 10, 7, 10, 1), (
        _C(3, "dot3InPauseFrames", COUNTER32, lambda p, c: p.in_pause_frames),
        _C(4, "dot3OutPauseFrames", COUNTER32, lambda p, c: p.out_pause_frames),
        _C(5, "dot3HCInPauseFrames", COUNTER64, lambda p, c: p.in_pause_frames),
        _C(6, "dot3HCOutPauseFrames", COUNTER64, lambda p, c: p.out_pause_frames),
    ), _port_rows),
    Scalar("lldpLocSysName", (1, 0, 8802, 1, 1, 2, 1, 3, 3), OCTET_STRING, lambda c: _text(c.info.name)),
    Table("lldpLocPortTable", (1, 0, 8802, 1, 1, 2, 1, 3, 7, 1), (
        _C(2, "lldpLocPortIdSubtype", INTEGER, lambda p, c: _local_port(p, c)[0]),
        _C(3, "lldpLocPortId", OCTET_STRING, lambda p, c: _local_port(p, c)[1]),
        _C(4, "lldpLocPortDesc", OCTET_STRING, lambda p, c: _local_port(p, c)[2]),
    ), _port_rows),
    Table("lldpRemTable", (1, 0, 8802, 1, 1, 2, 1, 4, 1, 1), (
        _C(4, "lldpRemChassisIdSubtype", INTEGER, lambda n, c: _chassis(n)[0]),
        _C(5, "lldpRemChassisId", OCTET_STRING, lambda n, c: _chassis(n)[1]),
        _C(6, "lldpRemPortIdSubtype", INTEGER, lambda n, c: n.port_id_subtype),
        _C(7, "lldpRemPortId", OCTET_STRING, lambda n, c: _port_id(n)),
        _C(8, "lldpRemPortDesc", OCTET_STRING, lambda n, c: _text(n.port_description)),
        _C(9, "lldpRemSysName", OCTET_STRING, lambda n, c: _text(n.system_name)),
    ), _lldp_rows),
    Table("ieee8021PfcIfTable", (1, 3, 111, 2, 802, 1, 1, 21, 1, 1, 1), (
        _C(2, "ieee8021PfcRequests", COUNTER32, lambda p, c: sum(p.pfc_tx)),
        _C(3, "ieee8021PfcIndications", COUNTER32, lambda p, c: sum(p.pfc_rx)),
    ), _port_rows),
    Table("cpfcIfTable", (1, 3, 6, 1, 4, 1, 9, 9, 813, 1, 1, 1), (
        _C(1, "cpfcIfRequests", COUNTER64, lambda p, c: sum(p.pfc_tx)),
        _C(2, "cpfcIfIndications", COUNTER64, lambda p, c: sum(p.pfc_rx)),
    ), _port_rows),
    Table("cpfcIfPriorityTable", (1, 3, 6, 1, 4, 1, 9, 9, 813, 1, 2, 1), (
        _C(2, "cpfcIfPriorityRequests", COUNTER64, lambda r, c: r[0].pfc_tx[r[1]]),
        _C(3, "cpfcIfPriorityIndications", COUNTER64, lambda r, c: r[0].pfc_rx[r[1]]),
    ), _pfc_priority_rows),
    *snmp_entity.TABLES,
    snmp_entity.LAST_CHANGE,
)  # fmt: skip

#: Every object, in OID order (objects never nest, so this orders their instances too).
OBJECTS: tuple[Scalar | Table, ...] = tuple(
    sorted(_DEFINITIONS, key=lambda o: o.oid if isinstance(o, Scalar) else o.entry)
)
_BASES: list[OID] = [o.oid if isinstance(o, Scalar) else o.entry for o in OBJECTS]
_SCALAR_TLV: list[bytes] = [encode_oid((*o.oid, 0)) if isinstance(o, Scalar) else b"" for o in OBJECTS]
_COLUMN_SUBS: list[list[int]] = [[c.sub for c in o.columns] if isinstance(o, Table) else [] for o in OBJECTS]
_COLUMN_PREFIX: list[list[bytes]] = [
    [encode_oid_content((*o.entry, c.sub)) for c in o.columns] if isinstance(o, Table) else [] for o in OBJECTS
]


class _Rows:
    """A table's rows in one snapshot: sorted indexes, row objects, index octets, positions."""

    __slots__ = ("content", "index", "objs", "pos")

    def __init__(self, rows: list[tuple[OID, Any]]) -> None:
        self.index = [idx for idx, _ in rows]
        self.objs = [obj for _, obj in rows]
        self.content = [encode_oid_arcs(idx) for idx in self.index]
        self.pos = {idx: k for k, idx in enumerate(self.index)}


#: Result of :meth:`SwitchMib.lookup` for a name that is no object type / no instance here.
NO_SUCH_OBJECT, NO_SUCH_INSTANCE = -1, -2
Position = tuple[int, int, int]  # (object, column, row); scalars use (object, 0, 0)


class SwitchMib:
    """The MIB of one switch frozen at one instant: exact lookup and lexicographic walks."""

    __slots__ = ("_rows", "ctx")

    def __init__(self, ctx: MibContext) -> None:
        self.ctx = ctx
        self._rows: list[_Rows | None] = [None] * len(OBJECTS)

    @classmethod
    def from_view(cls, view: FabricView, switch: str, info: SwitchInfo | None = None) -> SwitchMib | None:
        """Snapshot ``switch`` now; None when the view does not know it."""
        info = info if info is not None else view.switch(switch)
        if info is None:
            return None
        now = view.now_ns()
        optics = partial(view.transceivers, switch, now) if isinstance(view, snmp_entity.OpticsView) else None
        return cls(MibContext(info, view.ports(switch, now), view.lldp(switch), now, optics))

    def _table_rows(self, i: int) -> _Rows:
        rows = self._rows[i]
        if rows is None:
            table = OBJECTS[i]
            assert isinstance(table, Table)
            rows = self._rows[i] = _Rows(table.rows(self.ctx))
        return rows

    def lookup(self, oid: OID) -> Position | int:
        """The position of an exact instance, or NO_SUCH_OBJECT / NO_SUCH_INSTANCE (RFC 3416 §4.2.1)."""
        i = bisect_right(_BASES, oid) - 1
        if i < 0 or oid[: len(_BASES[i])] != _BASES[i]:
            return NO_SUCH_OBJECT
        rest = oid[len(_BASES[i]) :]
        if isinstance(OBJECTS[i], Scalar):
            return (i, 0, 0) if rest == (0,) else NO_SUCH_INSTANCE
        subs = _COLUMN_SUBS[i]
        j = bisect_left(subs, rest[0]) if rest else len(subs)
        if j == len(subs) or subs[j] != rest[0]:
            return NO_SUCH_OBJECT
        k = self._table_rows(i).pos.get(rest[1:])
        return NO_SUCH_INSTANCE if k is None else (i, j, k)

    def _next_in(self, i: int, rest: OID) -> Position | None:
        # First instance of object i strictly after base_i + rest.
        if isinstance(OBJECTS[i], Scalar):
            return (i, 0, 0) if not rest else None
        index = self._table_rows(i).index
        if not index:
            return None
        if not rest:
            return (i, 0, 0)
        subs = _COLUMN_SUBS[i]
        j = bisect_left(subs, rest[0])
        if j < len(subs) and subs[j] == rest[0]:
            k = bisect_right(index, rest[1:])
            if k < len(index):
                return (i, j, k)
            j += 1
        return (i, j, 0) if j < len(subs) else None

    def next_position(self, oid: OID) -> Position | None:
        """The first instance strictly after ``oid`` in OID order, or None past the end."""
        i = bisect_right(_BASES, oid) - 1
        if i >= 0 and oid[: len(_BASES[i])] == _BASES[i]:
            found = self._next_in(i, oid[len(_BASES[i]) :])
            if found is not None:
                return found
        for n in range(i + 1, len(OBJECTS)):
            found = self._next_in(n, ())
            if found is not None:
                return found
        return None

    def positions(self, oid: OID) -> Iterator[Position]:
        """Every instance after ``oid``, in OID order."""
        start = self.next_position(oid)
        if start is None:
            return
        i, j, k = start
        for n in range(i, len(OBJECTS)):
            if isinstance(OBJECTS[n], Scalar):
                yield (n, 0, 0)
            else:
                count = len(self._table_rows(n).index)
                for jj in range(j, len(_COLUMN_SUBS[n])):
                    for kk in range(k, count):
                        yield (n, jj, kk)
                    k = 0
            j = k = 0

    def instance(self, pos: Position) -> tuple[OID, int, Value]:
        """(OID, BER syntax, value) of an instance."""
        i, j, k = pos
        obj = OBJECTS[i]
        if isinstance(obj, Scalar):
            return (*obj.oid, 0), obj.syntax, obj.get(self.ctx)
        rows = self._table_rows(i)
        col = obj.columns[j]
        return (*obj.entry, col.sub, *rows.index[k]), col.syntax, col.get(rows.objs[k], self.ctx)

    def encoded(self, pos: Position) -> tuple[bytes, bytes]:
        """(name TLV, value TLV) of an instance: the fast path's unit of work."""
        i, j, k = pos
        obj = OBJECTS[i]
        if isinstance(obj, Scalar):
            return _SCALAR_TLV[i], encode_value(obj.syntax, obj.get(self.ctx))
        rows = self._table_rows(i)
        col = obj.columns[j]
        name = tlv(OBJECT_IDENTIFIER, _COLUMN_PREFIX[i][j] + rows.content[k])
        return name, encode_value(col.syntax, col.get(rows.objs[k], self.ctx))


class MibCache:
    """Per-switch snapshots reused for ``ttl_s`` (monotonic) so one walk burst sees one instant."""

    def __init__(self, view: FabricView, ttl_s: float = 0.5, clock: Callable[[], float] = time.monotonic) -> None:
        self.view = view
        self.ttl_s = ttl_s
        self._clock = clock
        self._snapshots: dict[str, tuple[float, SwitchMib]] = {}
        self.builds = 0

    def invalidate(self, switch: str) -> None:
        """Forget a switch's snapshot (its state changed: the next request sees the change at once)."""
        self._snapshots.pop(switch, None)

    def get(self, switch: str, info: SwitchInfo | None = None) -> SwitchMib | None:
        """The switch's current snapshot (rebuilt when stale or after a reboot); None if unknown."""
        now = self._clock()
        hit = self._snapshots.get(switch)
        fresh = hit is not None and now - hit[0] < self.ttl_s
        if hit is not None and fresh and (info is None or hit[1].ctx.info.boot_time_ns == info.boot_time_ns):
            return hit[1]
        mib = SwitchMib.from_view(self.view, switch, info)
        if mib is None:
            self._snapshots.pop(switch, None)
            return None
        self.builds += 1
        self._snapshots[switch] = (now, mib)
        return mib
