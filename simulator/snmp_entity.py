"""ENTITY-MIB and ENTITY-SENSOR-MIB rows of one simulated switch: its ports, transceivers and DOM sensors.

What is served (:mod:`simulator.snmp_mib` binds these rows to the tables):

* ENTITY-MIB (RFC 6933) entPhysicalTable ``1.3.6.1.2.1.47.1.1.1``: the chassis (index 1,
  chassis(3)); one port(10) entity per interface, contained in the chassis; for each present,
  cabled port, its transceiver as module(9) contained in the port; and four sensor(8) entities
  contained in the transceiver: temperature, laser bias, tx power, rx power.
* entAliasMappingTable ``1.3.6.1.2.1.47.1.3.2`` (index ``entPhysicalIndex.0``): each port
  entity's entAliasMappingIdentifier is ``ifIndex.<n>`` (``1.3.6.1.2.1.2.2.1.1.<n>``), as the
  MIB says a port entity maps to its interface. That, with entPhysicalContainedIn, is the only
  link from a sensor to its interface; names carry none (the collector never reads one from them).
* ENTITY-SENSOR-MIB (RFC 3433) entPhySensorTable ``1.3.6.1.2.1.99.1.1`` for the sensors.
* entLastChangeTime ``1.3.6.1.2.1.47.1.4.1.0``: sysUpTime at the latest oper change of any port
  (0 if none since boot). The entity rows change only when an optic is pulled or put back, and
  both change the port's oper status, so this moves at least whenever they change: a collector
  that trusts it never keeps a stale table, at the price of a re-read after a mere flap.

How a sensor is presented follows real agents' ENTITY-SENSOR-MIB, not CISCO-ENTITY-SENSOR-MIB's
dBm(14) type, which the standard MIB lacks (its "other" with a "dBm" units display is the only
standard way to say dBm, and neither reference agent below uses it):

* optical power is watts(6) at scale milli(8), precision 4 (0.1 µW steps, SFF-8472's own
  resolution), both in SONiC's sonic-snmpagent (``XcvrRxPowerSensor``) and in a recorded Arista
  DCS-7150S (snmpsim-data ``cloud/arista-dcs-7150s-52-cl``: "DOM RX Power Sensor", 4025 = 0.4025 mW);
* bias is amperes(5) at milli(8): precision 2 on EOS, 3 on SONiC;
* temperature is celsius(8) at units(9): precision 1 on EOS, 6 on SONiC.

EOS switches serve EOS's figures, every other NOS SONiC's, so the collector meets two
precisions. Direction (rx or tx) has no field in the MIB: every agent says it in the sensor's
entPhysicalDescr/Name ("DOM RX Power Sensor for Ethernet5"), and so does this one. The module's
alarm thresholds have no standard object either (they live in vendor MIBs), so none is served.

Indexes: port ``k`` (1-based, in ifIndex order) is entity ``1000·k``, its transceiver
``1000·k + 100`` and its sensors ``1000·k + 101..104``: stable while the port list is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from simulator.optics import OpticReading
from simulator.snmp_ber import GAUGE32, INTEGER, OBJECT_IDENTIFIER, OCTET_STRING, OID, TIMETICKS
from simulator.snmp_tables import Column, MibContext, Scalar, Table
from simulator.view import PortCounters

CHASSIS_INDEX = 1
CLASS_CHASSIS, CLASS_MODULE, CLASS_SENSOR, CLASS_PORT = 3, 9, 8, 10
SENSOR_AMPERES, SENSOR_WATTS, SENSOR_CELSIUS = 5, 6, 8
SCALE_MILLI, SCALE_UNITS = 8, 9
STATUS_OK = 1
#: entAliasMappingIdentifier of a port entity: ifIndex.<n> (IF-MIB).
IF_INDEX_OID: OID = (1, 3, 6, 1, 2, 1, 2, 2, 1, 1)
#: How often a sensor's value is refreshed (entPhySensorValueUpdateRate, ms): on every read here.
UPDATE_RATE_MS = 1000
#: The largest |entPhySensorValue| (SensorValue, RFC 3433).
SENSOR_VALUE_MAX = 1_000_000_000


@runtime_checkable
class OpticsView(Protocol):
    """A FabricView that also knows its transceivers (``FabricState`` does; a replay may not)."""

    def transceivers(self, switch: str, now_ns: int | None = None) -> list[OpticReading]:
        """DOM of every present, cabled port of ``switch`` at ``now_ns``."""
        ...


@dataclass(frozen=True, slots=True)
class Entity:
    """One entPhysicalEntry."""

    descr: str
    contained_in: int
    cls: int
    rel_pos: int
    name: str
    model: str = ""
    is_fru: bool = False


@dataclass(frozen=True, slots=True)
class Sensor:
    """One entPhySensorEntry."""

    type: int
    scale: int
    precision: int
    value: int
    units: str
    status: int = STATUS_OK


@dataclass(frozen=True, slots=True)
class Presentation:
    """How a NOS presents its transceiver sensors: (scale, precision) per quantity."""

    power: tuple[int, int]
    bias: tuple[int, int]
    temperature: tuple[int, int]


#: Arista EOS (the recorded DCS-7150S) and SONiC (sonic-snmpagent's rfc3433 sensor classes).
EOS = Presentation(power=(SCALE_MILLI, 4), bias=(SCALE_MILLI, 2), temperature=(SCALE_UNITS, 1))
SONIC = Presentation(power=(SCALE_MILLI, 4), bias=(SCALE_MILLI, 3), temperature=(SCALE_UNITS, 6))


def presentation(nos: str | None) -> Presentation:
    """The sensor presentation of a switch running ``nos``."""
    return EOS if nos == "eos" else SONIC


def sensor_value(quantity: float, scale: int, precision: int) -> int:
    """entPhySensorValue of ``quantity`` (in the sensor's base unit) at ``scale`` and ``precision``.

    The value is ``quantity / 10^(3·(scale-9)) · 10^precision``, rounded, clamped to SensorValue.
    """
    v = round(quantity / 10.0 ** (3 * (scale - SCALE_UNITS)) * 10.0**precision)
    return max(-SENSOR_VALUE_MAX, min(SENSOR_VALUE_MAX, v))


def _sensors(r: OpticReading, p: Presentation) -> list[tuple[str, Sensor]]:
    """(description, sensor) of one transceiver, in entity order (101..104)."""
    port = r.port
    watts = (
        (f"DOM TX Power Sensor for {port}", 10 ** (r.tx_power_dbm / 10) / 1000),
        (f"DOM RX Power Sensor for {port}", 10 ** (r.rx_power_dbm / 10) / 1000),
    )
    out = [
        (
            f"DOM Temperature Sensor for {port}",
            Sensor(SENSOR_CELSIUS, *p.temperature, sensor_value(r.temperature_c, *p.temperature), "Celsius"),
        ),
        (
            f"DOM TX Bias Sensor for {port}",
            Sensor(SENSOR_AMPERES, *p.bias, sensor_value(r.laser_bias_ma / 1000, *p.bias), "mA"),
        ),
    ]
    out += [(d, Sensor(SENSOR_WATTS, *p.power, sensor_value(w, *p.power), "mW")) for d, w in watts if math.isfinite(w)]
    return out


@dataclass(slots=True)
class EntityRows:
    """The three tables' rows of one switch at one instant, each sorted by index."""

    physical: list[tuple[OID, Entity]]
    alias: list[tuple[OID, OID]]
    sensors: list[tuple[OID, Sensor]]


def build(
    ports: Sequence[tuple[OID, PortCounters]], optics: Sequence[OpticReading], nos: str | None, switch: str
) -> EntityRows:
    """The entity, alias and sensor rows of a switch with ``ports`` ((ifIndex,), port) and ``optics``."""
    by_port = {r.port: r for r in optics}
    pres = presentation(nos)
    physical: list[tuple[OID, Entity]] = [
        (
            (CHASSIS_INDEX,),
            Entity(f"fabricmon simulated switch {switch}", 0, CLASS_CHASSIS, -1, switch, "fabricmon-sim"),
        )
    ]
    alias: list[tuple[OID, OID]] = []
    sensors: list[tuple[OID, Sensor]] = []
    for k, ((if_index,), p) in enumerate(ports, start=1):
        port_ent = 1000 * k
        physical.append(((port_ent,), Entity(p.name, CHASSIS_INDEX, CLASS_PORT, k, p.name)))
        alias.append(((port_ent, 0), (*IF_INDEX_OID, if_index)))
        r = by_port.get(p.name)
        if r is None or not p.present:
            continue
        module = port_ent + 100
        physical.append(
            ((module,), Entity(f"Xcvr for {p.name}", port_ent, CLASS_MODULE, 1, r.component, "QSFP-DD-400G-DR4", True))
        )
        for j, (descr, s) in enumerate(_sensors(r, pres), start=1):
            physical.append(((module + j,), Entity(descr, module, CLASS_SENSOR, j, descr)))
            sensors.append(((module + j,), s))
    return EntityRows(sorted(physical, key=lambda e: e[0]), sorted(alias), sorted(sensors, key=lambda e: e[0]))


def rows_of(ctx: MibContext) -> EntityRows:
    """The switch's entity rows at the context's instant (built once per snapshot)."""
    rows = ctx.memo.get("entity")
    if rows is None:
        optics = ctx.optics() if ctx.optics is not None else []
        rows = ctx.memo["entity"] = build(ctx.port_rows(), optics, ctx.info.nos, ctx.info.name)
    assert isinstance(rows, EntityRows)
    return rows


def _text(s: str) -> bytes:
    return s.encode("utf-8", "replace")


_C = Column
_TRUE, _FALSE = 1, 2  # TruthValue


def last_change_ticks(ctx: MibContext) -> int:
    """entLastChangeTime: the latest port oper change, as sysUpTime (see the module docstring)."""
    return max((ctx.ticks_since_boot(p.last_change_ns) for p in ctx.ports), default=0)


LAST_CHANGE = Scalar("entLastChangeTime", (1, 3, 6, 1, 2, 1, 47, 1, 4, 1), TIMETICKS, last_change_ticks)

TABLES: tuple[Table, ...] = (
    Table("entPhysicalTable", (1, 3, 6, 1, 2, 1, 47, 1, 1, 1, 1), (
        _C(2, "entPhysicalDescr", OCTET_STRING, lambda e, c: _text(e.descr)),
        _C(3, "entPhysicalVendorType", OBJECT_IDENTIFIER, lambda e, c: (0, 0)),
        _C(4, "entPhysicalContainedIn", INTEGER, lambda e, c: e.contained_in),
        _C(5, "entPhysicalClass", INTEGER, lambda e, c: e.cls),
        _C(6, "entPhysicalParentRelPos", INTEGER, lambda e, c: e.rel_pos),
        _C(7, "entPhysicalName", OCTET_STRING, lambda e, c: _text(e.name)),
        _C(13, "entPhysicalModelName", OCTET_STRING, lambda e, c: _text(e.model)),
        _C(16, "entPhysicalIsFRU", INTEGER, lambda e, c: _TRUE if e.is_fru else _FALSE),
    ), lambda c: rows_of(c).physical),
    Table("entAliasMappingTable", (1, 3, 6, 1, 2, 1, 47, 1, 3, 2, 1), (
        _C(2, "entAliasMappingIdentifier", OBJECT_IDENTIFIER, lambda oid, c: oid),
    ), lambda c: list(rows_of(c).alias)),
    Table("entPhySensorTable", (1, 3, 6, 1, 2, 1, 99, 1, 1, 1), (
        _C(1, "entPhySensorType", INTEGER, lambda s, c: s.type),
        _C(2, "entPhySensorScale", INTEGER, lambda s, c: s.scale),
        _C(3, "entPhySensorPrecision", INTEGER, lambda s, c: s.precision),
        _C(4, "entPhySensorValue", INTEGER, lambda s, c: s.value),
        _C(5, "entPhySensorOperStatus", INTEGER, lambda s, c: s.status),
        _C(6, "entPhySensorUnitsDisplay", OCTET_STRING, lambda s, c: _text(s.units)),
        _C(7, "entPhySensorValueTimeStamp", TIMETICKS, lambda s, c: c.ticks_since_boot(c.now_ns)),
        _C(8, "entPhySensorValueUpdateRate", GAUGE32, lambda s, c: UPDATE_RATE_MS),
    ), lambda c: list(rows_of(c).sensors)),
)  # fmt: skip
