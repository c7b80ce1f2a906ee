"""Transceiver DOM over SNMP: ENTITY-SENSOR-MIB sensors, mapped to interfaces by ENTITY-MIB.

A sensor (entPhySensorTable, indexed by entPhysicalIndex) belongs to the interface of the first
entity up its entPhysicalContainedIn chain that entAliasMappingTable maps to ``ifIndex.<n>``
(the MIB's own port → interface link). The transceiver (the sample's ``component``) is the entity
just below that port on the chain, or the mapped entity itself when it is no port(10) (an agent
that maps its transceivers to their interfaces); its entPhysicalName names it (else its descr). A sensor
whose chain reaches no mapped entity is skipped and counted (``unmapped``): the interface is
never read from a name ("DOM RX Power Sensor for Ethernet5" stays unmapped on an agent whose
entities do not say it).

Values: ``entPhySensorValue * 10^(3*(scale - 9)) / 10^precision`` in the type's unit
(RFC 3433 §3): celsius(8) → °C; amperes(5) → mA; watts(6) → dBm as ``10·log10(mW)``; and
other(1) whose units display reads "dBm" → dBm as is (how an agent puts dBm in the standard MIB).
Optical power has no direction in the MIB: every agent writes it in the sensor's entPhysicalDescr
or Name ("RX"/"Receive"/"Input" vs "TX"/"Transmit"/"Output"), so that is where it is read;
a power sensor saying neither or both is skipped and counted. Other types (volts, rpm) are not
DOM and are ignored. Sensors not ok(1) in entPhySensorOperStatus are not reported.

What a sensor is (its type, scale, precision, units, status, interface, transceiver and role) is
resolved once per read of the entity tables (:func:`plan`); a DOM poll walks only
entPhySensorValue and applies the plan (:func:`apply_plan`): the per-poll cost is one column.
When the tables are read is :mod:`collector.snmp_dom_poller`'s business.

A module with several lanes reports per lane; the sample keeps the worst lane (lowest rx and tx
power, highest bias, highest temperature), as :mod:`collector.optics_decode` does. Every value
is bounded (:data:`collector.optics_decode.BOUNDS`); malformed ones are skipped and counted by
kind through ``count_invalid``. Nothing here raises on what an agent sends.

ENTITY-SENSOR-MIB has no thresholds (they live in vendor MIBs), so SNMP DOM rows carry none and
the analyzer judges them against its configured ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from collector import snmp_lldp
from collector.gnmi_values import NOT_A_NUMBER, OUT_OF_RANGE, WRONG_TYPE, Bad
from collector.oids import IF_INDEX_COLUMN
from collector.optics_decode import BOUNDS
from collector.snmp_walk import Value
from store.dom import DomSample

#: EntitySensorDataType values read here.
OTHER, AMPERES, WATTS, CELSIUS = 1, 5, 6, 8
#: PhysicalClass port(10) (ENTITY-MIB).
CLASS_PORT = 10
STATUS_OK = 1
#: SensorValue (RFC 3433): -1e9..1e9; SensorPrecision: -8..9; scale: yocto(1)..yotta(17).
VALUE_MAX = 1_000_000_000
PRECISION_RANGE = range(-8, 10)
SCALE_RANGE = range(1, 18)
#: Longest containment chain followed (a chassis is a handful deep); longer, or a loop: unmapped.
MAX_DEPTH = 16
#: Characters kept of a component name.
MAX_NAME = 64
UNMAPPED = "dom sensor unmapped"
NO_DIRECTION = "dom power sensor without direction"

_TOKENS = re.compile(r"[a-z0-9]+")
_RX = frozenset({"rx", "receive", "received", "receiver", "input", "rcv"})
_TX = frozenset({"tx", "transmit", "transmitted", "transmitter", "output", "xmit"})

Invalid = Callable[[str, int], None]


def _int(value: Value | None) -> int:
    if value.__class__ is not int:
        raise Bad(WRONG_TYPE)
    assert isinstance(value, int)
    return value


def scaled(value: Value | None, scale: Value | None, precision: Value | None) -> float:
    """``value * 10^(3*(scale - 9)) / 10^precision``; raises :class:`Bad` on what RFC 3433 forbids."""
    return Reading.of(CELSIUS, scale, precision, "").scaled(value)


@dataclass(frozen=True, slots=True)
class Reading:
    """How one sensor's raw values read, resolved once from its static columns (per refresh, not
    per poll: a DOM poll of a 128-port switch reads ~500 values, so the powers of ten and the
    bounds are worked out here, not per value)."""

    unit: str  # dbm | ma | celsius
    exponent: int  # of 10 (RFC 3433: 3*(scale - 9) - precision)
    milli: bool  # amperes → mA; watts → mW, then dBm
    log: bool  # watts: dBm = 10·log10(mW)
    bad: str | None  # a scale or precision that makes every value unreadable (its invalid kind)
    power: float  # 10 ** |exponent|
    low: float  # the unit's bounds (BOUNDS)
    high: float

    @classmethod
    def of(cls, kind: Value | None, scale: Value | None, precision: Value | None, units: str) -> Reading:
        """Raises :class:`Bad` (wrong type) for a type that is no integer."""
        t = _int(kind)
        if t == CELSIUS:
            unit, milli, log = "celsius", False, False
        elif t == AMPERES:
            unit, milli, log = "ma", True, False
        elif t == WATTS:
            unit, milli, log = "dbm", True, True
        else:  # other(1) in dBm
            unit, milli, log = "dbm", False, False
        bad = None
        if scale.__class__ is not int or precision.__class__ is not int:
            bad, exponent = WRONG_TYPE, 0
        else:
            assert isinstance(scale, int) and isinstance(precision, int)
            exponent = 3 * (scale - 9) - precision
            if scale not in SCALE_RANGE or precision not in PRECISION_RANGE:
                bad = OUT_OF_RANGE
        power = 10.0 ** abs(exponent) if bad is None else 1.0  # (an absurd scale would overflow)
        return cls(unit, exponent, milli, log, bad, power, *BOUNDS[unit])

    def scaled(self, value: Value | None) -> float:
        """The raw value in the sensor's unit (A, W, °C); raises :class:`Bad`."""
        if value.__class__ is not int:
            raise Bad(WRONG_TYPE)
        if self.bad is not None:
            raise Bad(self.bad)
        assert isinstance(value, int)
        if not -VALUE_MAX <= value <= VALUE_MAX:
            raise Bad(OUT_OF_RANGE)
        # a division keeps 229 / 10 at 22.9
        return value * self.power if self.exponent >= 0 else value / self.power

    def read(self, value: Value | None) -> float:
        """The bounded value in dBm, mA or °C; raises :class:`Bad` with the invalid kind."""
        x = self.scaled(value)
        if self.milli:
            x *= 1e3
        if self.log:
            if not x > 0:
                raise Bad(OUT_OF_RANGE)  # no light has no dBm
            x = 10.0 * math.log10(x)
        if not self.low <= x <= self.high:
            raise Bad(OUT_OF_RANGE)
        return x


def quantity(kind: Value | None, scale: Value | None, precision: Value | None, value: Value | None,
             units: str) -> tuple[str, float] | None:  # fmt: skip
    """(``"dbm"``/``"ma"``/``"celsius"``, bounded value) of one sensor; None when it is no DOM type.

    Raises :class:`Bad` with the invalid kind for a value that cannot be read.
    """
    _int(kind)
    if not is_dom(kind, units):
        return None
    r = Reading.of(kind, scale, precision, units)
    return r.unit, r.read(value)


def is_dom(kind: Value | None, units: str) -> bool:
    """Whether a sensor of this entPhySensorType (and units display) can be a transceiver's DOM."""
    return kind.__class__ is int and (
        kind in (CELSIUS, AMPERES, WATTS) or (kind == OTHER and units.strip().lower() == "dbm")
    )


def direction(*texts: str) -> str | None:
    """``"rx"``/``"tx"`` from a power sensor's descr and name words; None when they say neither or both."""
    words = {w for t in texts for w in _TOKENS.findall(t[:256].lower())}
    rx, tx = bool(words & _RX), bool(words & _TX)
    return "rx" if rx and not tx else "tx" if tx and not rx else None


def if_index_of(identifier: Value | None) -> int | None:
    """The ifIndex an entAliasMappingIdentifier points at (``ifIndex.<n>``), else None."""
    if not isinstance(identifier, str) or len(identifier) > 128:
        return None
    prefix, _, n = identifier.lstrip(".").rpartition(".")
    return int(n) if prefix == IF_INDEX_COLUMN and n.isdigit() and 0 < int(n) < 2**31 else None


@dataclass(slots=True)
class EntityTree:
    """A switch's entities as containment, and which of them are interfaces."""

    parent: dict[str, str] = field(default_factory=dict)
    ports: set[str] = field(default_factory=set)  # entities of class port(10)
    names: dict[str, str] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)  # descr + name, for a sensor's direction
    if_index: dict[str, int] = field(default_factory=dict)  # entity → ifIndex (alias mapping)

    @classmethod
    def from_walk(
        cls, physical: Mapping[str, Mapping[str, Value]], alias: Mapping[str, Mapping[str, Value]]
    ) -> EntityTree:
        """From the walked entPhysicalTable and entAliasMappingTable columns."""
        tree = cls()
        for index, value in physical.get("contained_in", {}).items():
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31:
                tree.parent[index] = str(value)
        tree.ports = {i for i, v in physical.get("cls", {}).items() if v == CLASS_PORT}
        descr, name = physical.get("descr", {}), physical.get("name", {})
        for index in {*descr, *name}:
            d, n = snmp_lldp.text(descr.get(index))[:MAX_NAME], snmp_lldp.text(name.get(index))[:MAX_NAME]
            tree.names[index] = n or d or f"entity {index}"
            tree.texts[index] = f"{d} {n}"
        for index, value in alias.get("identifier", {}).items():
            entity, _, logical = index.partition(".")
            if_index = if_index_of(value)
            if if_index is not None and (logical in ("", "0") or entity not in tree.if_index):
                tree.if_index[entity] = if_index
        return tree

    def port_of(self, sensor: str) -> tuple[int, str] | None:
        """(ifIndex, transceiver entity) of a sensor; None when no mapped entity contains it.

        The transceiver is the mapped entity itself unless that is a port(10), which holds it:
        then the entity below the port on the sensor's chain.
        """
        below, at = sensor, sensor
        seen = {sensor}
        for _ in range(MAX_DEPTH):
            n = self.if_index.get(at)
            if n is not None:
                return n, below if at in self.ports else at
            up = self.parent.get(at)
            if up is None or up in seen:
                return None
            seen.add(up)
            below, at = at, up
        return None


#: The sample's fields in role order, and how lanes combine: the worst lane (lowest power,
#: highest bias and temperature); a role no sensor reported stays at its start and reads None.
ROLES = ("rx", "tx", "bias", "temperature")
_WORST_LOW = 2  # roles before this index keep their minimum, the others their maximum
_START = (math.inf, math.inf, -math.inf, -math.inf)


@dataclass(slots=True)
class DomCounts:
    """What one decode skipped, for the collector's stats."""

    sensors: int = 0  # DOM sensors read
    unmapped: int = 0
    invalid: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Planned:
    """One DOM sensor of a mapped interface: where it goes and how its value reads."""

    module: int  # index in SensorPlan.modules
    role: int  # index in ROLES
    reading: Reading


@dataclass(slots=True)
class SensorPlan:
    """Every sensor described by the static columns, resolved once per refresh (not per poll)."""

    sensors: dict[str, Planned] = field(default_factory=dict)
    modules: list[tuple[str, str]] = field(default_factory=list)  # (ifIndex, component) of each transceiver
    known: set[str] = field(default_factory=set)  # every index the static columns describe
    dom: int = 0  # DOM sensors that are ok(1)
    unmapped: int = 0
    no_direction: int = 0


_ROLE = {AMPERES: "bias", CELSIUS: "temperature"}


def plan(tree: EntityTree, static: Mapping[str, Mapping[str, Value]]) -> SensorPlan:
    """Resolve each described sensor: DOM or not, its interface and transceiver, its role."""
    out = SensorPlan()
    modules: dict[tuple[str, str], int] = {}
    kinds, units, status = static.get("type", {}), static.get("units", {}), static.get("status", {})
    scales, precisions = static.get("scale", {}), static.get("precision", {})
    for index, kind in kinds.items():
        out.known.add(index)
        unit_text = snmp_lldp.text(units.get(index))[:16]
        if status.get(index, STATUS_OK) != STATUS_OK or not is_dom(kind, unit_text):
            continue  # not reporting; or volts, rpm, ...: not DOM
        out.dom += 1
        where = tree.port_of(index)
        if where is None:
            out.unmapped += 1  # not read: a chassis or PSU sensor is no port's business
            continue
        role = _ROLE.get(kind, "") if isinstance(kind, int) else ""
        if not role:
            way = direction(tree.texts.get(index, ""))
            if way is None:
                out.no_direction += 1
                continue
            role = way
        module = (str(where[0]), tree.names.get(where[1], f"entity {where[1]}"))
        m = modules.get(module)
        if m is None:
            m = modules[module] = len(out.modules)
            out.modules.append(module)
        reading = Reading.of(kind, scales.get(index), precisions.get(index), unit_text)
        out.sensors[index] = Planned(m, ROLES.index(role), reading)
    return out


def apply_plan(
    at: datetime, switch: str, sensors: SensorPlan, values: Mapping[str, Value], if_names: Mapping[str, str]
) -> tuple[list[DomSample], DomCounts]:
    """One DOM sample per transceiver of a mapped interface, from the sensors' current values."""
    counts = DomCounts(sensors.dom, sensors.unmapped)
    if sensors.no_direction:
        counts.invalid[NO_DIRECTION] = sensors.no_direction
    ports = [if_names.get(if_index) for if_index, _ in sensors.modules]
    worst_of: list[list[float] | None] = [None] * len(ports)
    planned = sensors.sensors
    invalid = counts.invalid
    for index, value in values.items():
        s = planned.get(index)
        if s is None:
            continue
        m = s.module
        if not ports[m]:
            counts.unmapped += 1
            continue
        try:
            got = s.reading.read(value)
        except Bad as exc:
            invalid[exc.args[0]] = invalid.get(exc.args[0], 0) + 1
            continue
        except (ValueError, OverflowError):
            invalid[NOT_A_NUMBER] = invalid.get(NOT_A_NUMBER, 0) + 1
            continue
        worst = worst_of[m]
        if worst is None:
            worst = worst_of[m] = list(_START)
        r = s.role
        if (got < worst[r]) if r < _WORST_LOW else (got > worst[r]):
            worst[r] = got
    merged: dict[tuple[str, str], list[float]] = {}  # two interfaces an agent names alike: one sample
    for m, worst in enumerate(worst_of):
        if worst is None:
            continue
        key = (str(ports[m]), sensors.modules[m][1])
        have = merged.get(key)
        merged[key] = worst if have is None else [
            min(a, b) if r < _WORST_LOW else max(a, b) for r, (a, b) in enumerate(zip(have, worst, strict=True))
        ]  # fmt: skip
    samples = [
        DomSample(at, switch, port, component, *(None if math.isinf(v) else v for v in worst))
        for (port, component), worst in sorted(merged.items())
    ]
    return samples, counts


def decode(
    at: datetime,
    switch: str,
    tree: EntityTree,
    static: Mapping[str, Mapping[str, Value]],
    live: Mapping[str, Mapping[str, Value]],
    if_names: Mapping[str, str],
) -> tuple[list[DomSample], DomCounts]:
    """:func:`plan` then :func:`apply_plan` in one go (``live["status"]``, if given, overrides the static one)."""
    merged = {**static, "status": {**static.get("status", {}), **live.get("status", {})}}
    return apply_plan(at, switch, plan(tree, merged), live.get("value", {}), if_names)
