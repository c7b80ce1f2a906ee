"""SNMP as data: the numeric OIDs the SNMP collector reads, and what differs per NOS.

Everything here is a literal table, so a new NOS is a new :class:`SnmpProfile` entry, never
a subclass. OIDs are dotted strings without a leading dot (the form both codecs take and give).

Columns (:class:`Column`) name the :class:`~collector.records.PortReading` field they feed,
the SNMP type family the value must have (``int``, ``bytes`` or ``oid``; anything else is counted
invalid) and how long a value can be, which sizes GETBULK ``max-repetitions``.

Sources:

* IF-MIB (RFC 2863): ifTable ``1.3.6.1.2.1.2.2.1``, ifXTable ``1.3.6.1.2.1.31.1.1.1``.
* EtherLike-MIB (RFC 3635): dot3StatsTable ``1.3.6.1.2.1.10.7.2.1``, dot3PauseTable
  ``1.3.6.1.2.1.10.7.10.1``, both indexed by ``dot3StatsIndex`` = ifIndex.
* LLDP-MIB (IEEE 802.1AB-2005): lldpLocPortTable ``1.0.8802.1.1.2.1.3.7.1`` and lldpRemTable
  ``1.0.8802.1.1.2.1.4.1.1`` (index ``timeMark.localPortNum.remIndex``). ``lldpLocPortNum`` is
  *not* ifIndex on every agent (Arista EOS numbers Ethernet ports by ifIndex but Management1,
  ifIndex 999001, as 97), so local ports map through lldpLocPortId/lldpLocPortDesc first.
* IEEE8021-PFC-MIB (802.1Qbb): ieee8021PfcIfTable ``1.3.111.2.802.1.1.21.1.1.1`` (AUGMENTS
  ifEntry): Counter32 totals; ``Requests`` count M_CONTROL.request primitives = pause frames
  SENT, ``Indications`` = frames RECEIVED.
* ENTITY-MIB entPhysicalTable ``1.3.6.1.2.1.47.1.1.1`` and entAliasMappingTable
  ``1.3.6.1.2.1.47.1.3.2``, ENTITY-SENSOR-MIB entPhySensorTable ``1.3.6.1.2.1.99.1.1``: the
  transceivers' DOM sensors and what maps them to an interface (:mod:`collector.snmp_dom`).
* CISCO-PFC-EXT-MIB: cpfcIfPriorityTable ``1.3.6.1.4.1.9.9.813.1.2.1`` (index
  ``ifIndex.priority``), Counter64, same request = sent semantics. SONiC's agent filled it
  the other way round until sonic-snmpagent PR #89 ("Fix PFC counters TX/RX", 2018-09-27):
  its first ``ciscoPfcExtMIB`` (2018-01) served ``SAI_PORT_STAT_PFC_n_RX_PKTS`` as
  requests. Current SONiC follows the MIB; profile ``sonic-201803`` is for the old agents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SYS_UPTIME = "1.3.6.1.2.1.1.3.0"
IF_NUMBER = "1.3.6.1.2.1.2.1.0"

_IF = "1.3.6.1.2.1.2.2.1"
_IFX = "1.3.6.1.2.1.31.1.1.1"
_DOT3_STATS = "1.3.6.1.2.1.10.7.2.1"
_DOT3_PAUSE = "1.3.6.1.2.1.10.7.10.1"
_LLDP_LOC_PORT = "1.0.8802.1.1.2.1.3.7.1"
_LLDP_REM = "1.0.8802.1.1.2.1.4.1.1"
_IEEE_PFC = "1.3.111.2.802.1.1.21.1.1.1"
_CPFC_PRIO = "1.3.6.1.4.1.9.9.813.1.2.1"

Kind = Literal["int", "bytes", "oid"]


@dataclass(frozen=True, slots=True)
class Column:
    """One MIB column: its OID, the reading field it feeds, its value type and size bound."""

    oid: str
    field: str
    kind: Kind = "int"
    max_value_bytes: int = 9  # Counter64: 8 octets + a sign octet

    @property
    def varbind_bytes(self) -> int:
        """A bound on one varbind's BER size for a short index (OID + value + headers)."""
        return len(self.oid.split(".")) + 4 + self.max_value_bytes + 8


def _c(table: str, sub: int, field: str, kind: Kind = "int", max_value_bytes: int = 9) -> Column:
    return Column(f"{table}.{sub}", field, kind, max_value_bytes)


# --- per-port counters, all indexed by ifIndex ---------------------------------------------

#: 64-bit IF-MIB counters and state, walked every poll.
IF_COUNTERS: tuple[Column, ...] = (
    _c(_IFX, 6, "in_octets"),
    _c(_IFX, 7, "in_unicast_pkts"),
    _c(_IFX, 8, "in_multicast_pkts"),
    _c(_IFX, 9, "in_broadcast_pkts"),
    _c(_IFX, 10, "out_octets"),
    _c(_IFX, 11, "out_unicast_pkts"),
    _c(_IFX, 12, "out_multicast_pkts"),
    _c(_IFX, 13, "out_broadcast_pkts"),
    _c(_IFX, 15, "high_speed_mbps"),
    _c(_IFX, 19, "discontinuity_ticks"),
    _c(_IF, 8, "oper_status"),
    _c(_IF, 9, "last_change_ticks"),
    _c(_IF, 13, "in_discards"),
    _c(_IF, 14, "in_errors"),
    _c(_IF, 19, "out_discards"),
    _c(_IF, 20, "out_errors"),
    _c(_DOT3_STATS, 3, "in_fcs_errors"),
    _c(_DOT3_PAUSE, 5, "in_pause_frames"),
    _c(_DOT3_PAUSE, 6, "out_pause_frames"),
)

#: 32-bit fallbacks, walked only where the agent lacks the 64-bit column above.
IF_COUNTERS_32: dict[str, Column] = {
    "in_octets": _c(_IF, 10, "in_octets"),
    "in_unicast_pkts": _c(_IF, 11, "in_unicast_pkts"),
    "out_octets": _c(_IF, 16, "out_octets"),
    "out_unicast_pkts": _c(_IF, 17, "out_unicast_pkts"),
    "in_pause_frames": _c(_DOT3_PAUSE, 3, "in_pause_frames"),
    "out_pause_frames": _c(_DOT3_PAUSE, 4, "out_pause_frames"),
}

#: Counter fields whose IF-MIB/EtherLike source is always a Counter32 (they wrap mod 2^32).
ALWAYS_32: frozenset[str] = frozenset({"in_errors", "out_errors", "in_discards", "out_discards", "in_fcs_errors"})

#: 32-bit fallbacks that wrap within a poll on fast links: refused above this line rate x
#: interval (octets) or its minimum-frame packet rate (packets); see ``SwitchPoller._bound_32``.
RATE_BOUND_32: frozenset[str] = frozenset({"in_octets", "out_octets", "in_unicast_pkts", "out_unicast_pkts"})

# --- index tables, cached and refreshed rarely ---------------------------------------------

IF_INDEX: tuple[Column, ...] = (
    _c(_IFX, 1, "name", "bytes", 64),
    _c(_IF, 2, "descr", "bytes", 64),
    _c(_IFX, 18, "alias", "bytes", 64),
    _c(_IF, 3, "if_type"),
)
LLDP_LOC_PORT: tuple[Column, ...] = (
    _c(_LLDP_LOC_PORT, 2, "id_subtype"),
    _c(_LLDP_LOC_PORT, 3, "port_id", "bytes", 255),
    _c(_LLDP_LOC_PORT, 4, "port_desc", "bytes", 255),
)

# --- LLDP remote table ---------------------------------------------------------------------

LLDP_REM: tuple[Column, ...] = (
    _c(_LLDP_REM, 4, "chassis_subtype"),
    _c(_LLDP_REM, 5, "chassis_id", "bytes", 255),
    _c(_LLDP_REM, 6, "port_subtype"),
    _c(_LLDP_REM, 7, "port_id", "bytes", 255),
    _c(_LLDP_REM, 8, "port_desc", "bytes", 255),
    _c(_LLDP_REM, 9, "system_name", "bytes", 255),
)
#: LldpChassisIdSubtype / LldpPortIdSubtype values whose id is a MAC address (shown as aa:bb:..).
LLDP_CHASSIS_MAC, LLDP_PORT_MAC = 4, 3
#: LldpPortIdSubtype values whose lldpLocPortId is an interface name/alias or a local text.
LLDP_PORT_NAMED = frozenset({1, 5, 7})  # interfaceAlias, interfaceName, local

# --- PFC -----------------------------------------------------------------------------------

#: Per priority (CISCO-PFC-EXT-MIB, Counter64): (requests column, indications column).
CPFC_PRIORITY: tuple[Column, ...] = (
    _c(_CPFC_PRIO, 2, "pfc_requests"),
    _c(_CPFC_PRIO, 3, "pfc_indications"),
)
#: Per interface totals (IEEE8021-PFC-MIB, Counter32).
IEEE_PFC: tuple[Column, ...] = (
    _c(_IEEE_PFC, 2, "pfc_requests", max_value_bytes=5),
    _c(_IEEE_PFC, 3, "pfc_indications", max_value_bytes=5),
)
PFC_PRIORITIES = 8

PfcSource = Literal["cisco", "ieee"]

# --- transceiver DOM: ENTITY-MIB (RFC 6933) and ENTITY-SENSOR-MIB (RFC 3433) ---------------

_ENT_PHYSICAL = "1.3.6.1.2.1.47.1.1.1.1"
_ENT_ALIAS = "1.3.6.1.2.1.47.1.3.2.1"
_ENT_SENSOR = "1.3.6.1.2.1.99.1.1.1"
#: entPhysicalTable, indexed by entPhysicalIndex: what contains what (cached, refreshed rarely).
ENT_PHYSICAL: tuple[Column, ...] = (
    _c(_ENT_PHYSICAL, 2, "descr", "bytes", 255),
    _c(_ENT_PHYSICAL, 4, "contained_in", max_value_bytes=5),
    _c(_ENT_PHYSICAL, 5, "cls", max_value_bytes=3),
    _c(_ENT_PHYSICAL, 7, "name", "bytes", 255),
)
#: entAliasMappingTable (index entPhysicalIndex.entAliasLogicalIndexOrZero): a port entity's
#: interface, as a RowPointer to ``ifIndex.<n>``.
ENT_ALIAS: tuple[Column, ...] = (_c(_ENT_ALIAS, 2, "identifier", "oid", 40),)
#: entPhySensorTable's static columns (cached with the entities) and its live ones (every DOM poll).
_SENSOR_OPER_STATUS = _c(_ENT_SENSOR, 5, "status", max_value_bytes=3)
SENSOR_STATIC: tuple[Column, ...] = (
    _c(_ENT_SENSOR, 1, "type", max_value_bytes=3),
    _c(_ENT_SENSOR, 2, "scale", max_value_bytes=3),
    _c(_ENT_SENSOR, 3, "precision", max_value_bytes=3),
    _SENSOR_OPER_STATUS,
    _c(_ENT_SENSOR, 6, "units", "bytes", 255),
)
#: entPhySensorOperStatus alone: what a sensor re-plan reads while the entity tables stand still.
SENSOR_STATUS: tuple[Column, ...] = (_SENSOR_OPER_STATUS,)
#: SensorValue is an Integer32 of -1e9..1e9 (RFC 3433): 4 octets of BER at most (an agent past it
#: gets a cut answer, and the walk asks fewer rows).
SENSOR_LIVE: tuple[Column, ...] = (_c(_ENT_SENSOR, 4, "value", max_value_bytes=4),)
#: entLastChangeTime.0 (ENTITY-MIB, RFC 6933): sysUpTime when a row of the entity tables last
#: changed (a module plugged in or pulled out); where it has not moved, they need no re-read.
ENT_LAST_CHANGE = "1.3.6.1.2.1.47.1.4.1.0"
#: entAliasMappingIdentifier of a port entity: ``ifIndex.<n>`` (IF-MIB ifIndex column).
IF_INDEX_COLUMN = f"{_IF}.1"

# --- per-NOS profiles ----------------------------------------------------------------------

#: ifType values worth a reading: ethernetCsmacd(6), fastEther(62), fastEtherFX(69),
#: gigabitEthernet(117), ieee8023adLag(161). VLAN SVIs, loopbacks, tunnels are not fabric ports.
ETHERNET_IF_TYPES: frozenset[int] = frozenset({6, 62, 69, 117, 161})


@dataclass(frozen=True, slots=True)
class SnmpProfile:
    """What differs between NOSes over SNMP."""

    name: str
    #: PFC MIBs to try, in order; the first with rows wins (re-checked at each index refresh).
    pfc_sources: tuple[PfcSource, ...] = ("cisco", "ieee")
    #: True where cpfcIfPriorityRequests counts RECEIVED frames (SONiC's agent before 2018-09).
    cpfc_inverted: bool = False
    #: True where ieee8021PfcRequests counts RECEIVED frames (no known NOS; kept for symmetry).
    ieee_inverted: bool = False
    #: Only interfaces of these ifTypes become readings (None: every interface).
    if_types: frozenset[int] | None = ETHERNET_IF_TYPES


DEFAULT_PROFILE = SnmpProfile("standard")

#: Profile name (``targets[].profile``) → profile. Unknown names (e.g. gNMI's ``openconfig``,
#: the targets default) get :data:`DEFAULT_PROFILE`: the MIBs' own semantics.
PROFILES: dict[str, SnmpProfile] = {
    "standard": DEFAULT_PROFILE,
    "simulator": SnmpProfile("simulator"),
    "arista-eos": SnmpProfile("arista-eos", pfc_sources=("ieee",)),
    "cisco-nxos": SnmpProfile("cisco-nxos", pfc_sources=("cisco", "ieee")),
    "sonic": SnmpProfile("sonic", pfc_sources=("cisco",)),
    "sonic-201803": SnmpProfile("sonic-201803", pfc_sources=("cisco",), cpfc_inverted=True),
}


def profile_for(name: str) -> SnmpProfile:
    """The SNMP profile a target's ``profile`` names (the standard one when it names none)."""
    return PROFILES.get(name, DEFAULT_PROFILE)
