"""One verdict: the fabric's status, each health check's status and each job's health, from the
open incidents.

An incident is open when this round found it, or when it is still firing in the database (a
fault that just cleared stays open through the resolve hold-down). Both kinds count, so
``/v1/health``, ``fabricmon check``, a job's health and the alerts never disagree: any open
warning incident makes the fabric at least degraded, any critical one critical, and a health
check takes the worst severity of the incidents whose root or symptoms its checks found.
While an incident is open its severity and action are the stronger of what this round decided
and what receivers were told (:mod:`analyzer.alerts` never lowers them while open).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from analyzer.actions import Held, merge_decision, worse
from analyzer.engine import CHECKS, RULES_OF
from analyzer.evidence import max_loss
from analyzer.findings import SEVERITY_ORDER, Finding
from analyzer.incident_model import Incident
from analyzer.payloads import AlertRow

#: The health check of ``/v1/health`` each rule belongs to (the engine's table; ``collection``,
#: the incident of our own silence, belongs to the collection check).
CHECK_OF: dict[str, str] = {
    **{rule: name for name, checks in CHECKS.items() for check in checks for rule in RULES_OF[check]},
    "collection": "collection",
}
HEALTH_CHECKS = tuple(CHECKS)


@dataclass(frozen=True, slots=True)
class OpenIncident:
    """An open incident as the verdict sees it: this round's, a stored firing one, or both merged."""

    fingerprint: str
    id: int | None
    rule: str
    rules: frozenset[str]
    severity: str
    action: str
    action_hosts: tuple[str, ...]
    needs_review: bool
    pending: bool
    summary: str
    servers: frozenset[str]
    rails: tuple[int, ...]
    gpus: int
    efficiency_loss: float
    symptoms: int
    #: ``rule|key`` of every finding in it (root first is not implied).
    members: frozenset[str]
    #: False when only the database still holds it open (its fault cleared, hold-down running).
    seen_now: bool
    #: Its root cause is inside a maintenance window in force (action observe).
    maintenance: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fingerprint": self.fingerprint,
            "rule": self.rule,
            "severity": self.severity,
            "recommended_action": self.action,
            "action_hosts": list(self.action_hosts),
            "needs_review": self.needs_review,
            "pending": self.pending,
            "summary": self.summary,
            "symptoms": self.symptoms,
            "rules": sorted(self.rules),
            "members": sorted(self.members),
            "servers": len(self.servers),
            "gpus": self.gpus,
            "rails": list(self.rails),
            "efficiency_loss": round(self.efficiency_loss, 4),
            "seen_now": self.seen_now,
            "maintenance": self.maintenance,
        }


def from_incident(inc: Incident) -> OpenIncident:
    scope = inc.scope
    return OpenIncident(
        fingerprint=inc.fingerprint,
        id=None,
        rule=inc.rule,
        rules=frozenset(f.rule for f in inc.findings),
        severity=inc.severity,
        action=inc.action,
        action_hosts=inc.action_hosts,
        needs_review=inc.needs_review,
        pending=inc.pending,
        summary=inc.summary,
        servers=frozenset(scope.servers),
        rails=scope.rails,
        gpus=scope.gpus,
        efficiency_loss=inc.efficiency_loss,
        symptoms=len(inc.symptoms),
        members=frozenset(f"{f.rule}|{f.key}" for f in inc.findings),
        seen_now=True,
        maintenance=inc.maintenance,
    )


def from_alert(row: AlertRow) -> OpenIncident:
    servers = row.scope.get("servers", [])
    rails = row.scope.get("rails", [])
    return OpenIncident(
        fingerprint=row.fingerprint,
        id=row.id,
        rule=row.rule,
        rules=frozenset({row.rule, *(str(s.get("rule")) for s in row.symptoms)}),
        severity=row.severity,
        action=row.recommended_action or "observe",
        action_hosts=row.action_hosts,
        needs_review=row.needs_review,
        pending=False,
        summary=row.summary,
        servers=frozenset(str(s) for s in servers) if isinstance(servers, list) else frozenset(),
        rails=tuple(int(r) for r in rails) if isinstance(rails, list) else (),
        gpus=int(row.scope.get("gpus", 0) or 0),
        efficiency_loss=max_loss([row.details]),
        symptoms=len(row.symptoms),
        members=frozenset(
            {f"{row.root_cause.get('rule', row.rule)}|{row.root_cause.get('key', '')}"}
            | {f"{s.get('rule')}|{s.get('key')}" for s in row.symptoms}
        ),
        seen_now=False,
        maintenance=row.maintenance,
    )


def from_report(entry: Mapping[str, Any], findings: Mapping[str, Finding]) -> OpenIncident:
    """An incident of a stored report (``report["incidents"]``) with its blast radius rebuilt from
    its member findings (``findings``: ``rule|key`` -> finding of the same report)."""
    members = frozenset(str(m) for m in entry.get("members", []))
    found = [findings[m] for m in members if m in findings]
    return OpenIncident(
        fingerprint=str(entry["fingerprint"]),
        id=entry.get("id"),
        rule=str(entry["rule"]),
        rules=frozenset(str(r) for r in entry.get("rules", [entry["rule"]])),
        severity=str(entry["severity"]),
        action=str(entry.get("recommended_action", "observe")),
        action_hosts=tuple(str(h) for h in entry.get("action_hosts", [])),
        needs_review=bool(entry.get("needs_review", False)),
        pending=bool(entry.get("pending", False)),
        summary=str(entry.get("summary", "")),
        servers=frozenset(s for f in found for s in f.scope.servers),
        rails=tuple(int(r) for r in entry.get("rails", [])),
        gpus=int(entry.get("gpus", 0)),
        efficiency_loss=float(entry.get("efficiency_loss", 0.0)),
        symptoms=int(entry.get("symptoms", 0)),
        members=members,
        seen_now=bool(entry.get("seen_now", True)),
        maintenance=bool(entry.get("maintenance", False)),
    )


def open_incidents(
    current: Sequence[Incident], firing: Sequence[AlertRow], drain_limit: int | None = None
) -> list[OpenIncident]:
    """This round's incidents merged with the stored firing ones (same fingerprint: one)."""
    stored = {r.fingerprint: r for r in firing}
    out: list[OpenIncident] = []
    for inc in current:
        now = from_incident(inc)
        row = stored.pop(inc.fingerprint, None)
        if row is not None:
            held = merge_decision(
                Held(row.recommended_action or "observe", row.action_hosts, row.needs_review),
                Held(now.action, now.action_hosts, now.needs_review),
                drain_limit,
            )
            now = replace(
                now,
                id=row.id,
                severity="critical" if held.needs_review else worse(now.severity, row.severity),
                action=held.action,
                action_hosts=held.hosts,
                needs_review=held.needs_review,
                pending=False,
            )
        out.append(now)
    out += [from_alert(r) for r in stored.values()]
    return sorted(out, key=lambda o: (-SEVERITY_ORDER.get(o.severity, 0), o.rule, o.fingerprint))


def status_of(incidents: Iterable[OpenIncident]) -> str:
    """critical if any is critical, degraded if any is a warning, else healthy. Pending incidents
    (not confirmed, not sent) are listed but do not count: the verdict never says more than the
    alerts a receiver could have seen."""
    worst = max((SEVERITY_ORDER.get(o.severity, 0) for o in incidents if not o.pending), default=0)
    return "critical" if worst >= 2 else "degraded" if worst >= 1 else "healthy"


def check_statuses(incidents: Sequence[OpenIncident]) -> dict[str, str]:
    """Each health check: the worst incident with a finding from it (root or symptom)."""
    return {
        name: status_of(o for o in incidents if any(CHECK_OF.get(r) == name for r in o.rules)) for name in HEALTH_CHECKS
    }
