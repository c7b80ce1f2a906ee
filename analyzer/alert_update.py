"""A firing incident seen again: what its alert row becomes, and whether receivers hear of it.

Severity, action and action hosts only ever rise while it is open (:func:`analyzer.actions.merge_decision`),
the circuit breaker always wins, and an escalation is a rise above what receivers were told (see
:mod:`analyzer.alerts`). :func:`update_present` refreshes every present incident in one statement.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from analyzer.actions import ACTION_ORDER, Held, merge_decision, stronger, worse
from analyzer.budget import FleetUse
from analyzer.findings import SEVERITY_ORDER
from analyzer.incident_model import Incident
from analyzer.payloads import AlertRow, json_object, jsonable
from store.db import Connection, Record


def notified_servers(told: Sequence[str] | None, scope: Any = None) -> set[str]:
    """The servers receivers were told a firing incident touches (column ``notified_servers``;
    an alert stored before it was kept: its scope's servers)."""
    if told is not None:
        return {str(s) for s in told}
    servers = json_object(scope).get("servers")
    return {str(s) for s in servers} if isinstance(servers, list) else set()


def stored_fields(inc: Incident) -> dict[str, Any]:
    """The stored columns of ``inc`` that follow the latest evaluation. ``details`` is evidence
    only: the root finding's, the reason and the loss; what the incident is remembered by is in
    ``incident_memory`` (:func:`analyzer.incident_memory.memory_of`)."""
    return {
        "summary": inc.summary,
        "scope": to_json(inc.scope.as_dict()),
        "details": to_json(
            {
                **inc.root.details,
                "reason": inc.reason,
                "efficiency_loss": inc.efficiency_loss,
                **({"maintenance_windows": list(inc.windows)} if inc.maintenance else {}),
            }
        ),
        "root_cause": to_json(inc.root_cause),
        "symptoms": to_json(inc.symptom_list()),
    }


async def update_present(
    conn: Connection,
    present: Sequence[tuple[Record, Incident]],
    now: datetime,
    drain_limit: int | None,
    use: FleetUse | None = None,
) -> tuple[list[AlertRow], list[tuple[AlertRow, str]]]:
    """Refresh still-present incidents in one statement; returns every row updated, and the ones
    that escalated or changed with that event."""
    if not present:
        return [], []
    keys = ("id", "rule", "sev", "action", "hosts", "review", "reason", "nsev", "nact", "summary", "scope",
            "details", "root", "symptoms", "maint", "told")  # fmt: skip
    cols: dict[str, list[Any]] = {k: [] for k in keys}
    events: dict[int, str] = {}
    for rec, inc in present:
        stored = Held(rec["recommended_action"] or "observe", tuple(rec["action_hosts"] or ()), rec["needs_review"])
        held = merge_decision(stored, Held(inc.action, inc.action_hosts, inc.needs_review), drain_limit)
        reason = inc.reason
        if held.needs_review and not inc.needs_review:
            # a breaker that held it back before keeps its own reason (review is sticky while open)
            reason = (
                rec["reason"]
                if stored.needs_review and rec["reason"]
                else (
                    f"circuit breaker: the drains of this incident add up to {len(held.hosts)} hosts; a person decides"
                )
            )
        elif use is not None and not held.needs_review:
            before = set(stored.hosts) if stored.action == held.action and not stored.needs_review else set()
            if not set(held.hosts) <= before and (why := use.admit(held.action, held.hosts)):
                held, reason = Held("observe", held.hosts, True), why
        review, action, hosts = held.needs_review, held.action, list(held.hosts)
        severity = worse(rec["severity"], inc.severity)
        if review and not inc.needs_review:
            severity = "critical"
        told_servers = notified_servers(rec["notified_servers"], rec["scope"])
        grew = bool(set(inc.scope.servers) - told_servers)  # the blast radius reaches new hosts
        told_sev = rec["notified_severity"] or rec["severity"]
        told_act = rec["notified_action"] or rec["recommended_action"] or "observe"
        rises = (
            SEVERITY_ORDER[severity] > SEVERITY_ORDER[told_sev]
            or ACTION_ORDER[action] > ACTION_ORDER[told_act]
            or (review and not rec["needs_review"])
            or (action == "drain" and not set(hosts) <= set(rec["action_hosts"] or ()))
            or grew
        )
        old_symptoms = sorted((s.get("rule"), s.get("key")) for s in _loaded(rec["symptoms"]))
        new_symptoms = sorted((f.rule, f.key) for f in inc.symptoms)
        if rises:
            events[rec["id"]] = "escalated"
        elif rec["rule"] != inc.rule or old_symptoms != new_symptoms:
            events[rec["id"]] = "changed"
        f = stored_fields(inc)
        for key, value in (
            ("id", rec["id"]),
            ("rule", inc.rule),
            ("sev", severity),
            ("action", action),
            ("hosts", to_json(hosts)),
            ("review", review),
            ("reason", reason),
            ("nsev", worse(severity, told_sev)),
            ("nact", action if review else stronger(action, told_act)),
            ("summary", f["summary"]),
            ("scope", f["scope"]),
            ("details", f["details"]),
            ("root", f["root_cause"]),
            ("symptoms", f["symptoms"]),
            ("maint", inc.maintenance),
            ("told", to_json(sorted(told_servers | set(inc.scope.servers)))),
        ):
            cols[key].append(value)
    rows = await conn.fetch(
        """UPDATE alerts a SET last_seen_at = GREATEST(a.last_seen_at, $15), rule = u.rule, severity = u.sev,
                  recommended_action = u.action,
                  action_hosts = ARRAY(SELECT jsonb_array_elements_text(u.hosts::jsonb)),
                  needs_review = u.review, reason = u.reason, notified_severity = u.nsev,
                  notified_action = u.nact, summary = u.summary, scope = u.scope::jsonb,
                  details = u.details::jsonb, root_cause = u.root::jsonb, symptoms = u.symptoms::jsonb,
                  maintenance = u.maint,
                  notified_servers = ARRAY(SELECT jsonb_array_elements_text(u.told::jsonb))
           FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[],
                       $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                       $16::boolean[], $17::text[])
                AS u(id, rule, sev, action, hosts, review, reason, nsev, nact, summary, scope, details, root, symptoms,
                     maint, told)
           WHERE a.id = u.id AND a.state = 'firing'
           RETURNING a.*""",
        *list(cols.values())[:-2],
        now,
        cols["maint"],
        cols["told"],
    )
    updated = [AlertRow.from_record(r) for r in rows]
    return updated, [(a, events[a.id]) for a in updated if a.id in events]


def _loaded(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return [dict(v) for v in value] if isinstance(value, list) else []


def to_json(value: Any) -> str:
    """``value`` as compact JSON for a jsonb column."""
    return json.dumps(jsonable(value), separators=(",", ":"), allow_nan=False)
