"""Fault specifications (SPEC §7): parse, check against the fabric, describe as applied.

A fault is a JSON object: ``kind``, ``switch`` and the fields its kind takes (below);
``id`` is optional (one is assigned). :meth:`FaultSpec.from_dict` checks the shape,
:func:`resolve` checks it against a fabric and fills in defaults, so what
:meth:`simulator.fabric_state.FabricState.apply` receives is always applicable.

=====================  =====================================================================
kind                   fields (default)
=====================  =====================================================================
link_down              port (the switch's first uplink), removed (false; true: the optic was
                       pulled or a breakout changed, so the interface itself goes away)
link_flap              port, period_s (10; down for half a period, up for the other half),
                       count (unbounded: flaps until cleared)
speed_degrade          port, speed_gbps (half the design speed; below it)
pfc_storm              port, priority (3), rate_pps (5000)
error_burst            port, rate_pps (100) FCS errors on the port's receive side
miswire                server, gpu, to_leaf; switch (optional: the GPU's designed leaf)
switch_unreachable     (none)
reboot                 boot_s (5): seconds the switch stays down while it boots
snmp_slow              delay_s (3): the switch's SNMP agent answers this many seconds late
optic_degrade          port, db_per_hour (1): rx power falls steadily, FEC bins shift up until
                       uncorrectable, then the link fails (SPEC §10.5)
laser_aging            port, ma_per_hour (0.5): laser bias rises at constant tx power until the
                       laser dies
dirty_connector        port, loss_db (2): a step loss, then stable (benign below the margin)
fec_burst              port, duration_s (30): a short burst of high FEC bins that recovers
counter_clear          (none): an operator's ``clear counters``: every port's counters restart
                       from 0 at once, and its last-clear (gNMI) and ifCounterDiscontinuityTime
                       (SNMP) say when; clearing the fault changes nothing (counters stay cleared)
clock_step             step_s (90; negative: back): the switch's clock jumps (an NTP step) and
                       stays stepped until the fault clears (stepped back): gNMI timestamps,
                       last-change and last-clear move with it; SNMP (relative to boot) does not
=====================  =====================================================================

The four optics kinds act on the port's transceiver (:mod:`simulator.optics`); rates are per
hour of simulated time, so a test with a stepped clock or a large rate (3600 dB/h) reaches the
failure in seconds.

"First uplink" is the first port (in the switch's port order) whose cable goes up; a switch of
the top tier has none, so its first cabled port stands in. Ports are named as the inventory
names them (``Ethernet1/1``, ``et-0/0/1:2``). ``boot_s``, ``removed``, ``delay_s`` and ``snmp_slow`` are
additions to the SPEC's list.

``removed`` (a ``link_down`` of a pulled optic): the link is down at both ends, and the port
that lost its optic is *not present*: its gNMI stream sends one Notification that deletes the
interface (``/interfaces/interface[name=X]``, and the ``/qos`` and ``/lldp`` entries of the
families subscribed; SONiC: the ``COUNTERS/X``, ``PORT_TABLE/X`` and ``LLDP_ENTRY_TABLE/X``
keys, as its Redis tables lose them) and then no data for it; when the fault clears, the
interface comes back with its counters continuing where they stopped. Over SNMP the row stays
(ifIndex is stable, RFC 2863 §3.1.5) with ifOperStatus notPresent(6), the IF-MIB value for a
missing component, and counters frozen; the peer port is merely down.

``snmp_slow``: every SNMPv2c answer for the switch is computed when the request arrives and
sent ``delay_s`` later (a busy agent or a congested management network), so the values are
older than their arrival. SNMPv3 answers are not delayed (the pysnmp engine sends them).

Errors::

    FabricmonError
    └── FaultError (ValueError)          a fault that cannot be parsed or applied
        └── FaultConflict                 an ``id`` already in use, or a cable already miswired
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from fabric.errors import FabricmonError
from fabric.model import Endpoint, Fabric, Role


class FaultError(FabricmonError, ValueError):
    """A fault that cannot be parsed or does not fit the fabric; the message says which field."""


class FaultConflict(FaultError):
    """A fault whose ``id`` is already active, or that would move a cable already miswired."""


class FaultKind(StrEnum):
    """The fault kinds of SPEC §7."""

    LINK_DOWN = "link_down"
    LINK_FLAP = "link_flap"
    SPEED_DEGRADE = "speed_degrade"
    PFC_STORM = "pfc_storm"
    ERROR_BURST = "error_burst"
    MISWIRE = "miswire"
    SWITCH_UNREACHABLE = "switch_unreachable"
    REBOOT = "reboot"
    SNMP_SLOW = "snmp_slow"
    OPTIC_DEGRADE = "optic_degrade"
    LASER_AGING = "laser_aging"
    DIRTY_CONNECTOR = "dirty_connector"
    FEC_BURST = "fec_burst"
    COUNTER_CLEAR = "counter_clear"
    CLOCK_STEP = "clock_step"


#: The optional fields each kind takes, beyond ``id``, ``kind`` and ``switch``.
KIND_FIELDS: dict[FaultKind, frozenset[str]] = {
    FaultKind.LINK_DOWN: frozenset({"port", "removed"}),
    FaultKind.LINK_FLAP: frozenset({"port", "period_s", "count"}),
    FaultKind.SPEED_DEGRADE: frozenset({"port", "speed_gbps"}),
    FaultKind.PFC_STORM: frozenset({"port", "priority", "rate_pps"}),
    FaultKind.ERROR_BURST: frozenset({"port", "rate_pps"}),
    FaultKind.MISWIRE: frozenset({"server", "gpu", "to_leaf"}),
    FaultKind.SWITCH_UNREACHABLE: frozenset(),
    FaultKind.REBOOT: frozenset({"boot_s"}),
    FaultKind.SNMP_SLOW: frozenset({"delay_s"}),
    FaultKind.OPTIC_DEGRADE: frozenset({"port", "db_per_hour"}),
    FaultKind.LASER_AGING: frozenset({"port", "ma_per_hour"}),
    FaultKind.DIRTY_CONNECTOR: frozenset({"port", "loss_db"}),
    FaultKind.FEC_BURST: frozenset({"port", "duration_s"}),
    FaultKind.COUNTER_CLEAR: frozenset(),
    FaultKind.CLOCK_STEP: frozenset({"step_s"}),
}
#: The kinds acting on a port's transceiver (simulator.optics).
OPTIC_KINDS = frozenset(
    {FaultKind.OPTIC_DEGRADE, FaultKind.LASER_AGING, FaultKind.DIRTY_CONNECTOR, FaultKind.FEC_BURST}
)
#: Kinds that act on one cabled port of ``switch``.
PORT_KINDS = frozenset(k for k, f in KIND_FIELDS.items() if "port" in f)

_DEFAULT_PERIOD_S = 10.0
_MIN_PERIOD_S = 0.2
_DEFAULT_RATE = {FaultKind.PFC_STORM: 5000.0, FaultKind.ERROR_BURST: 100.0}
_MAX_RATE_PPS = 1e8
_DEFAULT_STEP_S = 90.0
_MAX_STEP_S = 86_400.0  # a day, as --clock-skew-s
#: (field, default, most) of the kinds with one figure, which must be above 0.
_FIGURE: dict[FaultKind, tuple[str, float, float]] = {
    FaultKind.REBOOT: ("boot_s", 5.0, 600.0),
    FaultKind.SNMP_SLOW: ("delay_s", 3.0, 120.0),
    FaultKind.OPTIC_DEGRADE: ("db_per_hour", 1.0, 1e6),
    FaultKind.LASER_AGING: ("ma_per_hour", 0.5, 1e6),
    FaultKind.DIRTY_CONNECTOR: ("loss_db", 2.0, 40.0),
    FaultKind.FEC_BURST: ("duration_s", 30.0, 86_400.0),
}


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """One fault as requested; after :func:`resolve`, with every default filled in."""

    kind: FaultKind
    switch: str | None = None
    port: str | None = None
    id: str | None = None
    priority: int | None = None
    rate_pps: float | None = None
    speed_gbps: int | None = None
    period_s: float | None = None
    count: int | None = None
    server: str | None = None
    gpu: int | None = None
    to_leaf: str | None = None
    boot_s: float | None = None
    removed: bool | None = None
    delay_s: float | None = None
    db_per_hour: float | None = None
    ma_per_hour: float | None = None
    loss_db: float | None = None
    duration_s: float | None = None
    step_s: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultSpec:
        """Parse a JSON/YAML object; raises :class:`FaultError` naming the first bad field."""
        if not isinstance(data, Mapping):
            raise FaultError(f"a fault must be an object, got {type(data).__name__}")
        raw_kind = data.get("kind")
        if raw_kind is None:
            raise FaultError("missing field 'kind'")
        try:
            kind = FaultKind(raw_kind)
        except ValueError:
            known = ", ".join(k.value for k in FaultKind)
            raise FaultError(f"unknown fault kind {raw_kind!r} (known: {known})") from None
        allowed = KIND_FIELDS[kind] | {"kind", "switch", "id"}
        for key in data:
            if key not in allowed:
                if key in _FIELD_TYPES:
                    raise FaultError(f"field {key!r} does not apply to {kind.value}")
                raise FaultError(f"unknown field {key!r}")
        values = {key: _typed(key, data[key]) for key in data if key != "kind" and data[key] is not None}
        if kind is not FaultKind.MISWIRE and "switch" not in values:
            raise FaultError("missing field 'switch'")
        return cls(kind=kind, **values)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, without unset fields."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind.value}
        out.update((k, v) for k, v in asdict(self).items() if v is not None and k not in out)
        return out


_FIELD_TYPES: dict[str, type] = {
    "switch": str,
    "port": str,
    "id": str,
    "priority": int,
    "rate_pps": float,
    "speed_gbps": int,
    "period_s": float,
    "count": int,
    "server": str,
    "gpu": int,
    "to_leaf": str,
    "boot_s": float,
    "removed": bool,
    "delay_s": float,
    "db_per_hour": float,
    "ma_per_hour": float,
    "loss_db": float,
    "duration_s": float,
    "step_s": float,
}


def _typed(key: str, value: Any) -> Any:
    want = _FIELD_TYPES[key]
    if want is str:
        if not isinstance(value, str) or not value:
            raise FaultError(f"field {key!r} must be a non-empty string (got {value!r})")
        return value
    if want is bool:
        if not isinstance(value, bool):
            raise FaultError(f"field {key!r} must be true or false (got {value!r})")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultError(f"field {key!r} must be a number (got {value!r})")
    if want is int:
        if isinstance(value, float) and not value.is_integer():
            raise FaultError(f"field {key!r} must be an integer (got {value!r})")
        return int(value)
    if not math.isfinite(value):
        raise FaultError(f"field {key!r} must be finite (got {value!r})")
    return float(value)


@dataclass(slots=True)
class AppliedFault:
    """A fault in effect: its resolved spec, when it started, and what the simulator chose.

    For a miswire, ``to_port`` is where the NIC landed on ``to_leaf`` and ``swapped_with`` the
    NIC that moved the other way (None when that port was free).
    """

    spec: FaultSpec
    started_at_ns: int
    to_port: str | None = None
    swapped_with: str | None = None

    @property
    def id(self) -> str:
        """The fault's id."""
        assert self.spec.id is not None
        return self.spec.id

    @property
    def switch(self) -> str:
        """The switch it acts on (for a miswire: the GPU's designed leaf)."""
        assert self.spec.switch is not None
        return self.spec.switch

    @property
    def port(self) -> str | None:
        """The port it acts on, when it acts on one."""
        return self.spec.port

    def to_dict(self) -> dict[str, Any]:
        """The fault as the control endpoint shows it."""
        out = self.spec.to_dict()
        started = datetime.fromtimestamp(self.started_at_ns / 1e9, tz=UTC)
        out["started_at"] = started.isoformat().replace("+00:00", "Z")
        out["started_at_ns"] = self.started_at_ns
        if self.to_port is not None:
            out["to_port"] = self.to_port
        if self.swapped_with is not None:
            out["swapped_with"] = self.swapped_with
        return out


def first_uplink(fabric: Fabric, switch: str) -> str:
    """The default port of a fault: the first cabled uplink, else (top tier) the first cabled port."""
    cabled = [p for p in fabric.ports(switch) if p.peer is not None]
    for p in cabled:
        if p.direction == "up":
            return p.name
    if cabled:
        return cabled[0].name
    raise FaultError(f"{switch} has no cabled port")


def resolve(fabric: Fabric, spec: FaultSpec, fault_id: str) -> FaultSpec:
    """Check ``spec`` against ``fabric`` and fill in ``id``, ``port`` and the kind's defaults."""
    spec = replace(spec, id=spec.id or fault_id)
    if spec.kind is FaultKind.MISWIRE:
        return _resolve_miswire(fabric, spec)
    assert spec.switch is not None
    sw = fabric.switches.get(spec.switch)
    if sw is None:
        raise FaultError(f"unknown switch {spec.switch!r}")
    if spec.kind in PORT_KINDS:
        port = spec.port or first_uplink(fabric, spec.switch)
        if port not in sw.port_names():
            raise FaultError(f"unknown port {port!r} on {spec.switch} ({_some_ports(sw.port_names())})")
        if fabric.peer(Endpoint(spec.switch, port)) is None:
            raise FaultError(f"port {port} of {spec.switch} is not cabled")
        spec = replace(spec, port=port)
    return _with_defaults(spec, sw.speed_gbps)


def _some_ports(names: tuple[str, ...]) -> str:
    """``Ethernet1/1, Ethernet1/5, ... Ethernet64/5`` (at most four names of a switch's ports)."""
    if len(names) <= 4:
        return ", ".join(names)
    return f"{', '.join(names[:2])}, ... {names[-1]}"


def miswire_target(fabric: Fabric, home: Endpoint, to_leaf: str) -> str | None:
    """The port of ``to_leaf`` at the same place as ``home`` on its leaf; None when it has none.

    That is what a technician does who picks the wrong switch: the same cage, the wrong box.
    """
    position = next((p.number for p in fabric.ports(home.node) if p.name == home.port), None)
    ports = fabric.ports(to_leaf)
    if position is None or position > len(ports) or ports[position - 1].direction != "down":
        return None
    return ports[position - 1].name


def _with_defaults(spec: FaultSpec, design_gbps: int) -> FaultSpec:
    """``spec`` with its kind's numeric fields checked and defaulted."""
    kind = spec.kind
    if kind is FaultKind.LINK_FLAP:
        period = _positive("period_s", spec.period_s, _DEFAULT_PERIOD_S, _MIN_PERIOD_S, 86_400.0)
        if spec.count is not None and spec.count < 1:
            raise FaultError(f"field 'count' must be >= 1 (got {spec.count})")
        spec = replace(spec, period_s=period)
    elif kind is FaultKind.SPEED_DEGRADE:
        design = design_gbps
        speed = design // 2 if spec.speed_gbps is None else spec.speed_gbps
        if not 0 < speed < design:
            raise FaultError(f"field 'speed_gbps' must be between 1 and {design - 1} (got {speed})")
        spec = replace(spec, speed_gbps=speed)
    elif kind in _DEFAULT_RATE:
        rate = _positive("rate_pps", spec.rate_pps, _DEFAULT_RATE[kind], 0.0, _MAX_RATE_PPS)
        spec = replace(spec, rate_pps=rate)
        if kind is FaultKind.PFC_STORM:
            priority = 3 if spec.priority is None else spec.priority
            if not 0 <= priority <= 7:
                raise FaultError(f"field 'priority' must be 0..7 (got {priority})")
            spec = replace(spec, priority=priority)
    elif kind in _FIGURE:
        name, default, most = _FIGURE[kind]
        figure: dict[str, Any] = {name: _positive(name, getattr(spec, name), default, 0.0, most)}
        spec = replace(spec, **figure)
    elif kind is FaultKind.CLOCK_STEP:
        spec = replace(spec, step_s=_step(spec.step_s))
    elif kind is FaultKind.LINK_DOWN and spec.removed is False:
        spec = replace(spec, removed=None)  # the plain form: ``removed`` shows only when it is true
    return spec


def _step(value: float | None) -> float:
    """A clock step (or the default) checked: non-zero, and no more than a day either way."""
    step = _DEFAULT_STEP_S if value is None else value
    if not (step != 0.0 and abs(step) <= _MAX_STEP_S):
        raise FaultError(f"field 'step_s' must be non-zero and within ±{_MAX_STEP_S:g} (got {step:g})")
    return step


def _positive(name: str, value: float | None, default: float, low: float, high: float) -> float:
    """``value`` (or ``default``) checked to lie in ``[low, high]``, and above 0."""
    v = default if value is None else value
    if not (v > 0.0 and low <= v <= high):
        raise FaultError(f"field {name!r} must be > 0, >= {low:g} and <= {high:g} (got {v:g})")
    return v


def _resolve_miswire(fabric: Fabric, spec: FaultSpec) -> FaultSpec:
    for key in ("server", "gpu", "to_leaf"):
        if getattr(spec, key) is None:
            raise FaultError(f"miswire needs field {key!r}")
    assert spec.server is not None and spec.gpu is not None and spec.to_leaf is not None
    server = fabric.servers.get(spec.server)
    if server is None:
        raise FaultError(f"unknown server {spec.server!r}")
    if not 1 <= spec.gpu <= server.gpus:
        raise FaultError(f"field 'gpu' must be 1..{server.gpus} (got {spec.gpu})")
    nic = fabric.nic(spec.server, spec.gpu)
    home = None if nic is None else fabric.peer(Endpoint(spec.server, nic))
    if home is None:
        raise FaultError(f"{spec.server} GPU {spec.gpu} is not cabled")
    if spec.switch is not None and spec.switch != home.node:
        raise FaultError(f"field 'switch' must be {home.node}, the leaf {spec.server} GPU {spec.gpu} is designed for")
    target = fabric.switches.get(spec.to_leaf)
    if target is None or target.role is not Role.LEAF:
        raise FaultError(f"field 'to_leaf' must name a leaf (got {spec.to_leaf!r})")
    if spec.to_leaf == home.node:
        raise FaultError(f"field 'to_leaf' must differ from the designed leaf {home.node}")
    if miswire_target(fabric, home, spec.to_leaf) is None:
        raise FaultError(f"{spec.to_leaf} has no down port where {home.port} is on {home.node}")
    return replace(spec, switch=home.node, port=home.port)
