"""Incidents, the unit alerts and actions work in: what one is, where its root cause is.

An :class:`Incident` is a root-cause finding with the findings it explains as its symptoms; it is
made by :func:`analyzer.correlation.correlate` and decided by :mod:`analyzer.actions`. This module
holds the model only (no grouping, no memory across rounds), so every reader of incidents can
import it without the correlation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from analyzer.evidence import CapacityEvidence, MiswireEvidence
from analyzer.findings import Finding, Scope, Severity
from analyzer.rules import evidence_of
from fabric.model import Endpoint, Fabric


@dataclass(frozen=True, slots=True)
class Observation:
    """What the analyzer knows of its own collection this round (see :mod:`analyzer.collection`)."""

    #: Switches fabricmon cannot observe now: their collector is silent, behind or replaying, or
    #: caught up too recently to judge them.
    unobserved: frozenset[str] = frozenset()
    #: Human text per problem ("collector host:123 silent for 42 s").
    problems: tuple[str, ...] = ()
    #: Whether collector heartbeats exist at all (False: judge by the data only).
    known: bool = False
    #: Switches whose collector is still starting: their silence is not judged at all yet.
    starting: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Incident:
    """Findings that share one root cause."""

    key: str
    kind: str
    root: Finding
    symptoms: tuple[Finding, ...] = ()
    #: Set by :func:`analyzer.actions.decide`.
    severity: Severity = "warning"
    action: str = "observe"
    #: Hosts the action applies to (the ones to drain; the ones whose jobs to checkpoint).
    action_hosts: tuple[str, ...] = ()
    needs_review: bool = False
    #: Not yet confirmed: shown in the verdict, not sent (a server link down for less than the
    #: fatal outage, which may be a blip or the start of a flap).
    pending: bool = False
    reason: str = ""
    #: Where the root cause is: switch, port, server, rail (None where it has none).
    location: dict[str, Any] = field(default_factory=dict)
    #: The links it holds, by naming end (``SWITCH:PORT``): what a firing switch incident is
    #: remembered by (:func:`held_links`).
    links: tuple[str, ...] = ()
    #: Its root cause is on a place inside a maintenance window in force (:mod:`analyzer.coverage`):
    #: action observe, whatever the action table says.
    maintenance: bool = False
    #: The ids of those windows.
    windows: tuple[int, ...] = ()

    @property
    def fingerprint(self) -> str:
        """Stable identity of the place: the same place is the same incident."""
        return hashlib.sha256(f"incident|{self.key}".encode()).hexdigest()[:16]

    @property
    def rule(self) -> str:
        return self.root.rule

    @property
    def findings(self) -> tuple[Finding, ...]:
        return (self.root, *self.symptoms)

    @property
    def scope(self) -> Scope:
        """The union blast radius of the root and every symptom."""
        return union_scope(f.scope for f in self.findings)

    @property
    def efficiency_loss(self) -> float:
        """The largest training-speed loss any of its findings estimates (0 when none does)."""
        return max(evidence_of(f).efficiency_loss for f in self.findings)

    @property
    def summary(self) -> str:
        more = len(self.symptoms)
        return self.root.summary + (f" (+{more} symptom{'s' if more != 1 else ''})" if more else "")

    @property
    def root_cause(self) -> dict[str, Any]:
        """The root cause: rule, key and location (switch, port, server, rail; None where it has none)."""
        return {"rule": self.rule, "key": self.root.key, **self.location}

    def symptom_list(self) -> list[dict[str, Any]]:
        """The symptoms as the API and webhooks show them: ``[{rule, key, severity, summary, scope}]``."""
        return [
            {"rule": f.rule, "key": f.key, "severity": f.severity, "summary": f.summary, "scope": f.scope.as_dict()}
            for f in self.symptoms
        ]


def union_scope(scopes: Iterable[Scope]) -> Scope:
    """The union of blast radii. GPUs are counted by (server, rail) where possible: the largest
    single count is a floor, since scopes do not list their (server, rail) pairs."""
    sw: set[str] = set()
    ports: set[str] = set()
    rails: set[int] = set()
    groups: set[int] = set()
    servers: set[str] = set()
    gpus = 0
    for s in scopes:
        sw.update(s.switches)
        ports.update(s.ports)
        rails.update(s.rails)
        groups.update(s.groups)
        servers.update(s.servers)
        gpus = max(gpus, s.gpus)
    return Scope(
        switches=tuple(sorted(sw)),
        ports=tuple(sorted(ports)),
        rails=tuple(sorted(rails)),
        groups=tuple(sorted(groups)),
        servers=tuple(sorted(servers)),
        gpus=max(gpus, len(servers)),  # every server in scope has at least one GPU touched
    )


def place_of(f: Finding, fabric: Fabric | None = None) -> dict[str, Any]:
    """Where a finding is: switch, port, server and rail (None where it has none)."""
    ev = evidence_of(f)
    switch: str | None = None
    port: str | None = None
    server = ev.server
    rail: int | None = None
    if isinstance(ev, MiswireEvidence):
        switch = ev.actual_leaf or ev.leaf
        port = ev.actual_port or ev.port
    elif f.rule in ("rail_capacity_asymmetry", "rail_load_straggler") and isinstance(ev, CapacityEvidence):
        rail = ev.rail if ev.rail is not None else _rail_of_key(f.key)
        switch = ev.bottleneck
    elif f.rule == "pfc_storm":
        # the storm's origin port is the key's "switch:port" (details.origin.port says the same)
        # (a port name may hold ':' itself, as Junos breakouts do: the priority is the last field)
        switch, _, rest = f.key.partition(":")
        port = rest.rpartition(":")[0] or None
    elif ":" in f.key:
        switch, port = f.key.split(":", 1)
    else:
        switch = f.key
        if f.rule == "oversubscription_drift" and isinstance(ev, CapacityEvidence) and len(ev.uplinks_lost) == 1:
            port = ev.uplinks_lost[0]  # one uplink lost or slowed: the drift is that port's
    if fabric is not None and switch in fabric.switches and rail is None:
        rail = fabric.switches[switch].rail
    if fabric is not None and server is None and switch in fabric.switches and port is not None:
        peer = fabric.peer(Endpoint(switch, port))
        if peer is not None and peer.node in fabric.servers:
            server = peer.node
    return {"switch": switch, "port": port, "server": server, "rail": rail}


def _rail_of_key(key: str) -> int | None:
    head, _, tail = key.partition("-")
    return int(tail) if head == "rail" and tail.isdigit() else None


def with_decision(incident: Incident, **changes: Any) -> Incident:
    """``incident`` with its decision fields set (severity, action, hosts, review, pending, reason,
    maintenance)."""
    return replace(incident, **changes)
