"""Which NOS each simulated switch imitates, and its device clock (SPEC §9.2).

``fabricmon sim --nos NAME[,NAME...]`` assigns notification shapes to the switches round-robin,
in the fabric's switch order (:func:`assign_nos`); ``mixed`` stands for all five. The simulated
counters are the same whatever the shape: only the gNMI wire form changes (SNMP is the same
IF-MIB for every NOS).

==========  ========================================================================  ============
NOS         gNMI wire form                                                             profile
==========  ========================================================================  ============
openconfig  one Notification per interface and family (prefix ``/interfaces/           openconfig
            interface[name=X]``, relative leaves); all at one timestamp (the default)
cumulus     the same, PFC in the NVIDIA Cumulus ``/qos`` family (as openconfig); FEC    openconfig
            also in its ``/interfaces/interface/phy`` leaves and histogram            (or cumulus)
eos         one Notification per container (``.../state/counters``, ``.../state``,      eos
            ``.../ethernet/state``) with relative leaves; PFC in its own Notification
            stamped 10 ms later; ON_CHANGE interface state re-sent (unchanged, new
            timestamp) half-way between samples
sonic       sonic-gnmi DB paths: target ``COUNTERS_DB`` path ``COUNTERS/<port>`` with   sonic
            ``SAI_PORT_STAT_*`` fields, target ``APPL_DB`` ``PORT_TABLE/<port>`` and
            ``LLDP_ENTRY_TABLE/<port>``; values are decimal strings in JSON_IETF
xr          prefix ``origin: openconfig-interfaces`` (no elements), update path          xr
            ``interfaces/interface[name=X]/state`` (and ``.../ethernet/state``) carrying
            a ``json_ietf_val`` container whose uint64 leaves are JSON strings
==========  ========================================================================  ============

How a SONiC switch is found: sonic-gnmi's prefix ``target`` names a Redis database, not a
device, and one sonic-gnmi server serves one switch. The simulator serves every switch on one
address, so for the DB targets (:data:`SONIC_TARGETS`) the switch is the one named by the
``username`` call metadata; ``fabricmon sim --write-config`` writes ``username: "{switch}"``
for SONiC targets. With server credentials configured, a SONiC switch's name is accepted as
the user name (the password must match). A SONiC switch asked with its own name as the target
answers in the OpenConfig form (SONiC's translib front end serves OpenConfig too).

Device clocks: ``--clock-skew-s S`` gives each switch a fixed offset drawn uniformly from
``[-S, +S]`` (seeded by ``--seed`` and the switch name, so it does not depend on the fabric's
order), added to every time it sends over gNMI: Notification timestamps, ``last-change`` and
``last-clear``. ``--clock-jitter-ms J`` adds independent noise in ``[-J, +J]`` ms to each
Notification's timestamp (not to the values). SNMP is unaffected: sysUpTime and ifLastChange
are relative to the boot, which a skewed clock does not move.

Errors::

    FabricmonError
    └── NosError (ValueError)     an unknown NOS name, or a bad skew/jitter figure
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from fabric.errors import FabricmonError
from fabric.model import Fabric

#: The prefix targets that name a SONiC Redis database (the switch comes from ``username``).
SONIC_TARGETS = frozenset({"COUNTERS_DB", "APPL_DB", "STATE_DB"})
#: The most skew the simulator gives a switch: a day (beyond that a clock is simply wrong).
MAX_SKEW_S = 86_400.0
MAX_JITTER_MS = 10_000.0


class NosError(FabricmonError, ValueError):
    """An unknown ``--nos`` name, or a clock figure out of range."""


class Nos(StrEnum):
    """The notification shapes the simulator speaks (SPEC §9.2)."""

    OPENCONFIG = "openconfig"
    EOS = "eos"
    SONIC = "sonic"
    XR = "xr"
    CUMULUS = "cumulus"


#: What ``--nos mixed`` means, in the round-robin order.
MIXED: tuple[Nos, ...] = (Nos.OPENCONFIG, Nos.EOS, Nos.SONIC, Nos.XR, Nos.CUMULUS)

#: The collector profile (``collector/profiles/<name>.yaml``) that decodes each shape.
PROFILES: dict[Nos, str] = {
    Nos.OPENCONFIG: "openconfig",
    Nos.CUMULUS: "openconfig",  # its phy FEC paths: the ``cumulus`` profile (5.15+), chosen by hand
    Nos.EOS: "eos",
    Nos.SONIC: "sonic",
    Nos.XR: "xr",
}


#: The shape a switch speaks when its inventory names its NOS: Junos and SR Linux stream
#: OpenConfig over gNMI, as the others can; a NOS the simulator has no shape for speaks OpenConfig.
SHAPE_OF_NOS: dict[str, Nos] = {
    "openconfig": Nos.OPENCONFIG,
    "eos": Nos.EOS,
    "sonic": Nos.SONIC,
    "xr": Nos.XR,
    "cumulus": Nos.CUMULUS,
    "junos": Nos.OPENCONFIG,
    "srlinux": Nos.OPENCONFIG,
}


def shapes_of(fabric: Fabric) -> dict[str, Nos]:
    """Switch → shape for every switch whose inventory names its NOS."""
    return {n: SHAPE_OF_NOS.get(sw.nos, Nos.OPENCONFIG) for n, sw in fabric.switches.items() if sw.nos is not None}


def parse_nos(names: str | Iterable[str]) -> tuple[Nos, ...]:
    """``"eos,sonic"`` (or a list of names) → the shapes in order; ``mixed`` expands to all five."""
    parts = names.split(",") if isinstance(names, str) else list(names)
    out: list[Nos] = []
    for raw in parts:
        name = raw.strip().lower()
        if not name:
            continue
        if name == "mixed":
            out.extend(MIXED)
            continue
        try:
            out.append(Nos(name))
        except ValueError:
            known = ", ".join([*(n.value for n in Nos), "mixed"])
            raise NosError(f"unknown NOS {raw.strip()!r} (known: {known})") from None
    if not out:
        raise NosError("--nos needs at least one name")
    return tuple(out)


def assign_nos(switches: Sequence[str], shapes: Sequence[Nos] = (Nos.OPENCONFIG,)) -> dict[str, Nos]:
    """Switch → shape, round-robin over ``shapes`` in the order of ``switches`` (the fabric's)."""
    if not shapes:
        raise NosError("no NOS to assign")
    return {name: shapes[i % len(shapes)] for i, name in enumerate(switches)}


def clock_offset_ns(switch: str, skew_s: float, seed: int) -> int:
    """The fixed clock offset of one switch: uniform in ``[-skew_s, +skew_s]``, in ns."""
    if skew_s <= 0:
        return 0
    return round(random.Random(f"clock:{seed}:{switch}").uniform(-skew_s, skew_s) * 1e9)


@dataclass(frozen=True, slots=True)
class Device:
    """How one simulated switch talks: its shape and its clock."""

    nos: Nos = Nos.OPENCONFIG
    clock_offset_ns: int = 0  # added to every time it sends over gNMI
    jitter_ns: int = 0  # per-Notification timestamp noise, at most this either way


DEFAULT_DEVICE = Device()


class Devices:
    """Every simulated switch's :class:`Device`; a switch not listed is a plain OpenConfig one."""

    def __init__(
        self,
        switches: Sequence[str],
        nos: Sequence[Nos] = (Nos.OPENCONFIG,),
        *,
        clock_skew_s: float = 0.0,
        clock_jitter_ms: float = 0.0,
        seed: int = 0,
        assigned: Mapping[str, Nos] | None = None,
    ) -> None:
        if not 0.0 <= clock_skew_s <= MAX_SKEW_S:
            raise NosError(f"--clock-skew-s must be between 0 and {MAX_SKEW_S:g} (got {clock_skew_s:g})")
        if not 0.0 <= clock_jitter_ms <= MAX_JITTER_MS:
            raise NosError(f"--clock-jitter-ms must be between 0 and {MAX_JITTER_MS:g} (got {clock_jitter_ms:g})")
        self.shapes = tuple(nos)
        self.clock_skew_s = clock_skew_s
        self.seed = seed
        jitter = round(clock_jitter_ms * 1e6)
        dealt = assign_nos([s for s in switches if s not in (assigned or {})], self.shapes)
        shape_of = {**dealt, **(assigned or {})}
        self._devices = {
            name: Device(shape_of[name], clock_offset_ns(name, clock_skew_s, seed), jitter) for name in switches
        }

    def get(self, switch: str) -> Device:
        """The device of ``switch`` (the default OpenConfig one when unknown)."""
        return self._devices.get(switch, DEFAULT_DEVICE)

    def nos_of(self, switch: str) -> Nos:
        """Which NOS ``switch`` imitates."""
        return self.get(switch).nos

    def assignment(self) -> dict[str, Nos]:
        """Switch → NOS, in the fabric's order."""
        return {name: d.nos for name, d in self._devices.items()}

    def offsets(self) -> Mapping[str, int]:
        """Switch → clock offset (ns)."""
        return {name: d.clock_offset_ns for name, d in self._devices.items()}

    @property
    def uniform(self) -> bool:
        """True when every switch is a plain OpenConfig one with a perfect clock (today's form)."""
        return all(d == DEFAULT_DEVICE for d in self._devices.values())
