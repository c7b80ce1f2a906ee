"""What a training scheduler should do about an incident, and which jobs it touches.

A drain we recommend is a drain someone executes, so the action is decided once per incident
(:mod:`analyzer.correlation`), from where the root cause is in the fabric, never per finding:

=================================================  ==========================================
root cause                                         recommended action (``action_hosts``)
=================================================  ==========================================
fabricmon's own collection (``collection``)        ``observe``, always
server link (leaf down-port) down for               ``drain`` that host
``fatal_outage_s`` or more, or flapping
server link down for less                          pending: not sent until it lasts or flaps
miswired GPU NIC (on another rail's leaf)          ``drain`` that host (both hosts of a swap)
leaf/spine uplink lost, slowed or flapping,        ``observe`` while the efficiency model says
a spine or superspine down                          the jobs under it lose less than
                                                   ``alerts.checkpoint_efficiency_loss``
                                                   (default 5 %), ``checkpoint`` above
PFC storm                                          ``checkpoint`` the jobs behind the paused
                                                   ports
leaf down (its links down, seen by its peers)      ``drain`` the hosts that lost their only
                                                   path on that rail (its servers)
switch silent while its collector reports, links   ``observe`` (its management plane, not its
up at its peers                                    forwarding; or unknown: ``needs_review``)
error rate on a server link, critical              ``checkpoint`` that host's jobs
link predicted to fail (``link_degrading``) within  server link: ``checkpoint`` that host's jobs;
``alerts.checkpoint_lead_s`` (2 h)                  uplink: as a lost uplink (efficiency model);
                                                   a ``drain`` only once it actually fails
anything else                                      ``observe``; ``checkpoint`` when a finding's
                                                   ``efficiency_loss`` reaches the threshold
=================================================  ==========================================

**Circuit breaker.** One incident never recommends draining more than ``alerts.max_drain_hosts``
hosts (8) nor more than ``alerts.max_drain_fraction`` of the fabric's servers (1 %, but never
fewer than one host, so a small fabric can still drain a host). Above that the action becomes
``observe`` with ``needs_review: true`` and severity critical: a person decides. Across
incidents, the drain budget and the checkpoint breaker (:mod:`analyzer.budget`) do the same.

**Severity** follows the action: ``critical`` when the incident recommends drain or checkpoint
or needs review, else ``warning`` (``info`` when every finding is info). A downed uplink that
ECMP carries around at 98 % capacity is a warning, whatever the drift check's own severity.
The collection incident is critical from 10 % of the switches unobserved.

Efficiency model (FABRIC.md, :mod:`analyzer.slo`): a switch that keeps a share ``s`` of its
uplink capacity gives the GPUs below it ``s`` of their per-GPU bandwidth on that rail; the loss
is ``1 - efficiency(s·B) / efficiency(B)`` with ``B`` the NIC speed in GB/s.

Affected jobs are the registered jobs (table ``jobs``) whose hosts intersect the incident's
servers; each is reported with the hosts of it that are in scope.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, TypedDict

from analyzer.config import AlertsConfig
from analyzer.evidence import DegradingEvidence, MiswireEvidence, OutageEvidence, StaleEvidence
from analyzer.findings import SEVERITY_ORDER, Severity
from analyzer.incident_model import Incident, with_decision
from analyzer.links import link_end
from analyzer.rules import CUTS_PATH, evidence_of
from analyzer.slo import efficiency_loss
from fabric.model import Endpoint, Fabric, Role
from store.db import Connection

Action = Literal["drain", "checkpoint", "observe"]
ACTION_ORDER: dict[str, int] = {"observe": 0, "checkpoint": 1, "drain": 2}


class AffectedJob(TypedDict):
    """One entry of a webhook body's ``jobs``."""

    id: str
    affected_hosts: list[str]


@dataclass(frozen=True, slots=True)
class ActionPolicy:
    """The thresholds of the action table (from the ``alerts`` config section)."""

    checkpoint_efficiency_loss: float = 0.05
    checkpoint_interruption_probability: float = 0.5
    max_drain_hosts: int = 8
    max_drain_fraction: float = 0.01
    drain_budget_hosts: int = 16
    drain_budget_fraction: float = 0.05
    max_checkpoint_hosts: int = 256
    max_checkpoint_fraction: float = 1.0
    #: A link predicted to fail sooner than this checkpoints the jobs it carries (issue 26).
    checkpoint_lead_s: float = 7200.0

    @classmethod
    def from_config(cls, config: AlertsConfig) -> ActionPolicy:
        return cls(
            config.checkpoint_efficiency_loss,
            config.checkpoint_interruption_probability,
            config.max_drain_hosts,
            config.max_drain_fraction,
            config.drain_budget_hosts,
            config.drain_budget_fraction,
            config.max_checkpoint_hosts,
            config.max_checkpoint_fraction,
            checkpoint_lead_s=config.checkpoint_lead_s,
        )

    def drain_limit(self, servers: int) -> int:
        """The most hosts one incident may drain in a fabric of ``servers`` servers."""
        return _limit(self.max_drain_hosts, self.max_drain_fraction, servers)

    def drain_budget(self, servers: int) -> int:
        """The most hosts all open incidents together may hold drained (:mod:`analyzer.budget`)."""
        return _limit(self.drain_budget_hosts, self.drain_budget_fraction, servers)

    def checkpoint_budget(self, servers: int) -> int:
        """The most hosts all open incidents together may checkpoint at once."""
        return _limit(self.max_checkpoint_hosts, self.max_checkpoint_fraction, servers)


def _limit(hosts: int, fraction: float, servers: int) -> int:
    """``hosts`` and ``fraction`` of ``servers`` both in force (the smaller wins), never below one host."""
    return min(hosts, max(1, math.floor(fraction * servers)))


@dataclass(frozen=True, slots=True)
class _Verdict:
    action: Action
    hosts: tuple[str, ...] = ()
    reason: str = ""
    pending: bool = False
    review: bool = False


def decide(incident: Incident, fabric: Fabric, policy: ActionPolicy | None = None) -> Incident:
    """``incident`` with its severity, action, action hosts and review flag (the module table)."""
    policy = policy or ActionPolicy()
    if incident.kind == "collection":
        return with_decision(
            incident,
            severity=incident.root.severity,
            action="observe",
            action_hosts=(),
            reason="our own collection is impaired: no fabric judgment on what we cannot see",
        )
    if incident.kind == "switch":
        v = _switch(incident, fabric, policy)
    elif incident.kind == "link":
        v = _link(incident, fabric, policy)
    elif incident.kind == "miswire":
        v = _miswire(incident, fabric)
    else:
        v = _by_loss(incident, policy, incident.efficiency_loss)
    if v.action == "drain" and len(v.hosts) > (limit := policy.drain_limit(len(fabric.servers))):
        v = _Verdict(
            "observe",
            v.hosts,
            f"circuit breaker: {v.reason}, which would drain {len(v.hosts)} hosts, more than the "
            f"{limit} one incident may drain; a person decides",
            review=True,
        )
    return with_decision(
        incident,
        severity=_severity(incident, v),
        action=v.action,
        action_hosts=tuple(sorted(v.hosts)),
        needs_review=v.review,
        pending=v.pending,
        reason=v.reason,
    )


def decide_all(incidents: Iterable[Incident], fabric: Fabric, policy: ActionPolicy | None = None) -> list[Incident]:
    """:func:`decide` for each."""
    return [decide(i, fabric, policy) for i in incidents]


def _severity(incident: Incident, v: _Verdict) -> Severity:
    if v.action != "observe" or v.review:
        return "critical"
    if all(f.severity == "info" for f in incident.findings):
        return "info"
    return "warning"


def _by_loss(incident: Incident, policy: ActionPolicy, loss: float) -> _Verdict:
    servers = incident.scope.servers
    interrupt = max([0.0, *(evidence_of(f).interruption_probability for f in incident.findings)])
    if loss >= policy.checkpoint_efficiency_loss:
        return _Verdict("checkpoint", servers, f"the jobs under it lose {loss:.1%} of their training speed")
    if interrupt >= policy.checkpoint_interruption_probability:
        return _Verdict("checkpoint", servers, f"interruption probability {interrupt:.0%}")
    return _Verdict("observe", (), f"training speed loss {loss:.2%}, below the checkpoint threshold")


def host_of(fabric: Fabric, switch: str, port: str) -> str | None:
    """The server at the far end of ``switch:port`` when it is a leaf's server-facing port."""
    sw = fabric.switches.get(switch)
    if sw is None or sw.role is not Role.LEAF:
        return None
    peer = fabric.peer(Endpoint(switch, port))
    return peer.node if peer is not None and peer.node in fabric.servers else None


def uplink_loss(fabric: Fabric, switch: str, lost: int) -> float:
    """Training-speed loss of the GPUs below ``switch`` when ``lost`` of its uplinks carry nothing."""
    if switch not in fabric.switches:
        return 0.0
    ups = sum(1 for p in fabric.ports(switch) if p.peer is not None and p.direction == "up")
    if ups == 0:
        return 0.0
    per_gpu = fabric.gpu_speed_gbps / 8
    return efficiency_loss(per_gpu, per_gpu * max(0.0, 1 - lost / ups))


def _link(incident: Incident, fabric: Fabric, policy: ActionPolicy) -> _Verdict:
    rules = {f.rule for f in incident.findings}
    if "pfc_storm" in rules:  # every tree of it (a storm continued from another origin is one too)
        hosts = sorted({h for f in incident.findings if f.rule == "pfc_storm" for h in f.scope.servers})
        return _Verdict("checkpoint", tuple(hosts), "a PFC storm pauses the jobs behind its ports")
    _, switch, port = incident.key.split(":", 2)
    host = host_of(fabric, switch, port)
    soon = _failing_soon(incident, policy)
    if host is None:  # an uplink: ECMP carries around it; the efficiency model decides
        down = any(f.rule in CUTS_PATH for f in incident.findings)
        if soon and not down:
            v = _by_loss(incident, policy, max(incident.efficiency_loss, uplink_loss(fabric, switch, 1)))
            return _Verdict(v.action, v.hosts, f"{soon}; once it fails, {v.reason}")
        return _by_loss(incident, policy, max(incident.efficiency_loss, uplink_loss(fabric, switch, 1) if down else 0))
    if "link_flapping" in rules:
        return _Verdict("drain", (host,), f"{host}'s NIC link keeps flapping: NCCL times out on it")
    outage = next((f for f in incident.findings if f.rule == "link_outage"), None)
    ev = evidence_of(outage) if outage is not None else None
    if outage is not None and isinstance(ev, OutageEvidence) and not ev.up_again:
        if outage.severity == "critical":
            return _Verdict("drain", (host,), f"{host} lost its only path on the rail (its NIC link is down)")
        return _Verdict("observe", (host,), "a server link down for less than the fatal outage", pending=True)
    if isinstance(ev, OutageEvidence) and ev.longest_completed_s >= ev.fatal_outage_s:
        # up again, but it was down long enough to kill the job on it: the same drain whenever we look
        return _Verdict("drain", (host,), f"{host}'s NIC link was down past the fatal outage; up again")
    if soon:
        return _Verdict("checkpoint", (host,), f"{soon}: checkpoint {host}'s jobs before it does")
    errors = next((f for f in incident.findings if f.rule == "error_rate"), None)
    if errors is not None and errors.severity == "critical":
        return _Verdict("checkpoint", (host,), f"{host}'s link corrupts frames at a critical rate")
    return _Verdict("observe", (), "the server link is up again")


def _failing_soon(incident: Incident, policy: ActionPolicy) -> str:
    """Why, when and how sure, if a ``link_degrading`` finding predicts failure within the lead."""
    f = next((f for f in incident.findings if f.rule == "link_degrading"), None)
    ev = evidence_of(f) if f is not None else None
    if f is None or not isinstance(ev, DegradingEvidence) or ev.time_to_failure_s is None:
        return ""
    ttf = ev.time_to_failure_s
    if ttf > policy.checkpoint_lead_s:
        return ""
    when = "" if f.observed_at is None else f" (by {(f.observed_at + timedelta(seconds=ttf)).isoformat()})"
    return f"its {ev.basis} trend predicts the link fails in {ttf / 60:.0f} min{when}, {ev.confidence:.0%} sure"


def _miswire(incident: Incident, fabric: Fabric) -> _Verdict:
    evidence = [evidence_of(f) for f in incident.findings]
    hosts = sorted({ev.server for ev in evidence if isinstance(ev, MiswireEvidence) and ev.wrong_rail and ev.server})
    if hosts:
        return _Verdict("drain", tuple(hosts), "GPU NICs cabled to another rail's leaf: their rail path is wrong")
    return _Verdict("observe", (), "cabled to the wrong port of the right switch: the path still works")


def _switch(incident: Incident, fabric: Fabric, policy: ActionPolicy) -> _Verdict:
    name = incident.key.split(":", 1)[1]
    sw = fabric.switches.get(name)
    links_down, dead = _links_down(incident, fabric, name)
    if sw is not None and sw.role is Role.LEAF:
        if links_down is None:
            why = f"{name} is silent and its peers cannot tell whether it forwards"
            return _Verdict("observe", (), why, review=True)
        ups = {link_end(fabric, name, p.name) for p in fabric.ports(name) if p.peer is not None and p.direction == "up"}
        if dead or (ups and ups <= links_down):
            # silent with its spines seeing its uplinks down, or every uplink down: the leaf is gone
            # with its servers' path on the rail
            hosts = sorted(fabric.servers_on(name))
        else:
            hosts = sorted(h for s, p in links_down if (h := host_of(fabric, s, p)) is not None)
        if hosts:
            return _Verdict("drain", tuple(hosts), f"{len(hosts)} hosts lost their only path on rail {sw.rail}")
        lost = sum(1 for s, p in links_down if host_of(fabric, s, p) is None)
        return _by_loss(incident, policy, max(incident.efficiency_loss, uplink_loss(fabric, name, lost)))
    if links_down is None:
        return _Verdict("observe", (), f"{name} is silent and nothing shows whether it forwards", review=True)
    loss = 0.0
    by_lower: dict[str, int] = {}
    for s, p in links_down:
        peer = fabric.peer(Endpoint(s, p))
        lower = s if s != name else (peer.node if peer is not None else s)
        by_lower[lower] = by_lower.get(lower, 0) + 1
    for lower, n in by_lower.items():
        loss = max(loss, uplink_loss(fabric, lower, n))
    return _by_loss(incident, policy, max(loss, incident.efficiency_loss))


def _links_down(incident: Incident, fabric: Fabric, name: str) -> tuple[set[tuple[str, str]] | None, bool]:
    """Links of the switch down now (naming ends), and whether the switch is gone (silent, and its
    peers see its links down). None when nothing tells: the switch is silent and no peer reports
    on its links."""
    down: set[tuple[str, str]] = set()
    told = dead = False
    for f in incident.findings:
        ev = evidence_of(f)
        if isinstance(ev, OutageEvidence) and ":" not in f.key:
            down |= set(ev.links_down)
            told = True
        elif isinstance(ev, OutageEvidence) and not ev.up_again:
            s, p = f.key.split(":", 1)
            down.add(link_end(fabric, s, p))
            told = True
        elif isinstance(ev, StaleEvidence) and ev.peer_links_down is not None:
            if ev.gone:
                down |= {link_end(fabric, name, p.name) for p in fabric.ports(name) if p.peer is not None}
                told = dead = True
            elif ev.peer_links_up:
                told = True
        elif f.rule == "link_flapping":
            s, p = f.key.split(":", 1)
            down.add(link_end(fabric, s, p))  # a flapping cable is no path NCCL can use
            told = True
        elif f.rule == "switch_flapping":
            told = True
    silent = any(f.rule == "stale_switch" for f in incident.findings)
    if silent and not told:
        return None, False
    return down, dead


async def affected_jobs(conn: Connection, servers: Sequence[str]) -> list[AffectedJob]:
    """Registered jobs whose hosts intersect ``servers``, each with its hosts in scope (sorted by id)."""
    if not servers:
        return []
    rows = await conn.fetch(
        """SELECT id, ARRAY(SELECT DISTINCT h FROM unnest(hosts) AS h WHERE h = ANY($1::text[]) ORDER BY h) AS hit
           FROM jobs WHERE hosts && $1::text[] ORDER BY id""",
        list(servers),
    )
    return [AffectedJob(id=r["id"], affected_hosts=list(r["hit"])) for r in rows]


@dataclass(frozen=True, slots=True)
class Held:
    """An open incident's action as receivers were told it, merged with this round's decision."""

    action: str
    hosts: tuple[str, ...]
    needs_review: bool


def merge_decision(stored: Held, now: Held, drain_limit: int | None = None) -> Held:
    """What an open incident holds after this round.

    Actions only rise while it is open: a drain is not withdrawn. Drain hosts are the union of
    every round's (a drained host stays drained until the incident resolves); a drain that follows
    a checkpoint takes its own hosts, never the checkpoint's. The circuit breaker is applied again
    to the union, and it always wins: once review is needed the action is ``observe`` with the
    hosts a person should look at.
    """
    review = stored.needs_review or now.needs_review
    if review:
        return Held("observe", tuple(sorted(set(stored.hosts) | set(now.hosts))), True)
    action = stronger(stored.action, now.action)
    if action == "drain":
        hosts = set(now.hosts if now.action == "drain" else ()) | set(stored.hosts if stored.action == "drain" else ())
        if drain_limit is not None and len(hosts) > drain_limit:
            return Held("observe", tuple(sorted(hosts)), True)
        return Held("drain", tuple(sorted(hosts)), False)
    if action == stored.action and action != now.action:
        return Held(action, stored.hosts, False)
    kept = set(stored.hosts) if action == stored.action else set()
    return Held(action, tuple(sorted(set(now.hosts) | kept)), False)


def stronger(a: str, b: str) -> str:
    """The stronger of two actions."""
    return a if ACTION_ORDER.get(a, 0) >= ACTION_ORDER.get(b, 0) else b


def worse(a: str, b: str) -> str:
    """The worse of two severities."""
    return a if SEVERITY_ORDER.get(a, 0) >= SEVERITY_ORDER.get(b, 0) else b
