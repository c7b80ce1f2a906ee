"""What one round's checks compute and share (:class:`analyzer.context.RoundResults`): the latest
window of every port, the flap window, the live down:up ratios and the rails' capacities.

Plain data, no check logic: the checks (analyzer.snapshot, analyzer.flaps,
analyzer.oversubscription, analyzer.rails) build these and the context carries them, so the
context imports no check and no check's types hide behind ``TYPE_CHECKING``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from analyzer.links import PortKey, link_end
from fabric.model import Fabric


@dataclass(slots=True)
class PortNow:
    """One port over the latest window (not frozen: 82K of them are built per evaluation, and a
    frozen dataclass's ``__init__`` costs twice as much; treat it as read-only)."""

    oper_up: bool | None
    speed_bps: int | None
    in_bps: float | None
    out_bps: float | None
    last_time: datetime


Snapshot = dict[tuple[str, str], PortNow]


#: One flap event: (switch, port, time, flaps it stands for).
FlapEvent = tuple[str, str, datetime, int]


@dataclass(slots=True)
class LinkFlaps:
    """The flaps of one link in the window, as each end reported them."""

    end: PortKey
    by_end: Counter[PortKey] = field(default_factory=Counter)
    last: datetime | None = None

    @property
    def count(self) -> int:
        """Flaps of the link: the end that saw most (both ends see the same flaps)."""
        return max(self.by_end.values(), default=0)


@dataclass(frozen=True, slots=True)
class FlapWindow:
    """The flap events of the stability window, per link, and the switches they correlate on."""

    events: list[FlapEvent]
    links: dict[PortKey, LinkFlaps]
    bursts: dict[str, set[str]]
    spread_s: float

    def absorbed(self, fabric: Fabric) -> dict[PortKey, str]:
        """Link (naming end) -> the switch whose correlated burst covers it."""
        return {link_end(fabric, s, p): s for s, ports in sorted(self.bursts.items()) for p in ports}


@dataclass(frozen=True, slots=True)
class Ratio:
    """Live down:up capacity of one switch, or of a roll-up (``scope``: switch|rail|group|fabric;
    a roll-up's tiers are named ``<roll-up>/<tier>``, e.g. ``rail-3/leaf``)."""

    scope: str
    name: str
    down_gbps: float
    up_gbps: float
    design_ratio: float
    uplinks_lost: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        return self.down_gbps / self.up_gbps if self.up_gbps > 0 else float("inf")

    @property
    def drift(self) -> float:
        """How far above design, as a fraction (0.016: 1.6 % more down than up)."""
        return self.ratio / self.design_ratio - 1 if self.design_ratio > 0 else 0.0


@dataclass(frozen=True, slots=True)
class RailCapacity:
    """One rail's live uplink capacity."""

    rail: int
    live_gbps: float
    design_gbps: float
    bottleneck: str | None
    bottleneck_fraction: float
    lost_ports: tuple[tuple[str, str], ...]
    #: Cabled uplinks of the rail without a sample in the snapshot (counted at design speed).
    unreported_ports: tuple[tuple[str, str], ...] = ()


__all__ = ["FlapEvent", "FlapWindow", "LinkFlaps", "PortNow", "RailCapacity", "Ratio", "Snapshot"]
