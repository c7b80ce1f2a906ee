"""Findings: what a check concluded, with the blast radius that makes it actionable.

A :class:`Finding` is produced by one check for one thing (a switch, a port, a rail, a cable)
and names everything it touches. Its ``fingerprint`` (rule + key) is stable across analyzer
runs and restarts, so the alert lifecycle can tell "still firing" from "new".

Rules (``rule``; which check makes each, its incident's place and precedence: :mod:`analyzer.rules`):

==========================  ================================================================
rule                        key
==========================  ================================================================
miswire                     ``server:gpu``: a server's GPU NIC on the wrong leaf
rail_capacity_asymmetry     ``rail-R``: a rail's live uplink capacity below design/peers
rail_load_straggler         ``rail-R``: a rail carrying well below its peers while traffic flows
ecmp_imbalance              ``switch``: uneven tx across a switch's live uplinks
oversubscription_drift      ``switch``: live down:up capacity ratio above design + tolerance
link_flapping               ``switch:port`` (the lower-tier end): flaps in the window
link_outage                 ``switch:port``: down now, or a single outage over the fatal threshold
pfc_storm                   ``switch:port:priority`` of the port where the storm started
error_rate                  ``switch:port``: FCS/CRC or discard rate above threshold
link_degrading              ``switch:port`` (the lower-tier end): optics/FEC trends predict the
                            link fails within ``link_horizon_s`` (analyzer/link_health.py)
switch_flapping             ``switch``: many ports of one switch flapping within seconds
stale_switch                ``switch``: not heard from in ``stale_intervals`` intervals
ports_unreported            ``switch``: reports, but some cabled ports sent no sample in
                            ``stale_intervals`` intervals (one finding per switch)
==========================  ================================================================
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from fabric.model import Fabric, Role

Severity = Literal["info", "warning", "critical"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}


@dataclass(frozen=True, slots=True)
class Scope:
    """The blast radius: what a finding touches."""

    switches: tuple[str, ...] = ()
    ports: tuple[str, ...] = ()  # "switch:port"
    rails: tuple[int, ...] = ()
    groups: tuple[int, ...] = ()
    servers: tuple[str, ...] = ()
    gpus: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "switches": list(self.switches),
            "ports": list(self.ports),
            "rails": list(self.rails),
            "groups": list(self.groups),
            "servers": list(self.servers),
            "gpus": self.gpus,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """One conclusion of one check."""

    rule: str
    key: str
    severity: Severity
    summary: str
    scope: Scope
    details: dict[str, Any] = field(default_factory=dict)
    observed_at: datetime | None = None

    @property
    def fingerprint(self) -> str:
        """Stable identity: the same rule on the same thing is the same alert."""
        return hashlib.sha256(f"{self.rule}|{self.key}".encode()).hexdigest()[:16]


def blast_radius(
    fabric: Fabric,
    *,
    switches: Iterable[str] = (),
    ports: Iterable[tuple[str, str]] = (),
    gpus: Iterable[tuple[str, int]] = (),
) -> Scope:
    """The scope of a fault on these switches, ports and (server, GPU) NICs.

    What a fault touches is counted in (server, rail) pairs, i.e. GPUs: a leaf down-port touches
    its one server's GPU on that rail; a leaf (or one of its uplinks) the GPUs of that rail on
    all its servers; a spine of rail r the rail-r GPUs of every server below it; a superspine
    carries cross-rail traffic, so every GPU of the servers below it.
    """
    pairs: set[tuple[str, int]] = set(gpus)
    touched: set[str] = set()
    port_names: list[str] = []
    for name in switches:
        touched.add(name)
        pairs |= _pairs(fabric, name, None)
    for name, port in ports:
        touched.add(name)
        port_names.append(f"{name}:{port}")
        pairs |= _pairs(fabric, name, port)
    servers = {srv for srv, _ in pairs}
    rails = {r for _, r in pairs} | {fabric.switches[n].rail for n in touched if n in fabric.switches} - {None}
    groups = {fabric.servers[s].group for s in servers if s in fabric.servers}
    return Scope(
        switches=tuple(sorted(touched)),
        ports=tuple(sorted(port_names)),
        rails=tuple(sorted(r for r in rails if r is not None)),
        groups=tuple(sorted(groups)),
        servers=tuple(sorted(servers)),
        gpus=len(pairs),
    )


def _pairs(fabric: Fabric, switch: str, port: str | None) -> set[tuple[str, int]]:
    sw = fabric.switches.get(switch)
    if sw is None:
        return set()
    if sw.role is Role.LEAF and port is not None:
        info = next((p for p in fabric.ports(switch) if p.name == port), None)
        if info is not None and info.direction == "down":
            return {(info.peer.node, sw.rail or 0)} if info.peer is not None else set()
    below = fabric.servers_on(switch)
    if sw.rail is not None:
        return {(srv, sw.rail) for srv in below}
    return {(srv, r) for srv in below for r in range(1, fabric.rails + 1)}
