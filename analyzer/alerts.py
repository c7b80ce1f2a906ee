"""The incident lifecycle: incidents in, firing/resolved alerts and their webhook deliveries out.

An alert is an **incident** (:mod:`analyzer.correlation`): the findings that share one root cause,
with one severity, one recommended action and the hosts it applies to (:mod:`analyzer.actions`).
Each evaluation calls :func:`sync_alerts` with its decided incidents. In one transaction,
holding the firing alerts' row locks (so two analyzers take turns):

* an incident whose fingerprint (its place) has no firing alert **opens**: a new ``alerts`` row
  and one ``alert.firing`` delivery per webhook. A *pending* incident (a server link down for
  less than the fatal outage) is not opened until it is confirmed;
* a firing incident that is present is **updated**: last seen, summary, root cause, symptoms and
  scope follow the latest evaluation. Severity, action and action hosts only ever rise while it is
  open (a drain recommended is not withdrawn until the incident resolves), except that the
  circuit breaker always wins: once it withholds a drain, the action is ``observe`` with
  ``needs_review``. ``maintenance`` follows the latest evaluation (an incident inside a window
  is observed; one that outlasts its window is acted on, and that is an escalation). No
  delivery, except on **escalation**: the severity or the action rises above what receivers were
  told, review becomes needed, a drain gains hosts, or the blast radius grows (the scope reaches
  servers receivers were not told of: ``details.notified_servers``, once per growth). One more
  ``alert.firing`` then carries the new state (same alert id). A change of root or symptoms
  without escalation is recorded in the timeline (``incident_events``) and sent to nobody;
* a firing incident absent for at least ``hold_down_s`` since ``last_seen_at`` **resolves** with
  one ``alert.resolved`` delivery per webhook, carrying the action it held (what to undo).

Each transition also stores the scheduler actions it asks for (a Slurm drain when it opens or
escalates with action drain: :mod:`analyzer.scheduler_actions`), in the same transaction, so an
incident and its drain commit or vanish together; the resume is stored by the first sync after it has
stayed resolved for ``resume_after_s``. The fleet-wide limits (:mod:`analyzer.budget`: the drain
budget and the checkpoint breaker across incidents) are applied here too, under the same locks.

All state is in the database: a restarted analyzer finds its firing incidents there, so it
neither re-opens (the unique partial index ``alerts_one_firing``) nor forgets them. With
``evaluated_rules``, incidents whose root rule's check did not run this time are left alone
instead of resolving. The Alertmanager labels are fixed when an incident opens (column
``labels``), so a receiver sees one label set from the first firing to the resolve.
Acknowledging (:func:`ack_alert`) is for people and sends nothing. After a sync that enqueued
deliveries, call the sender's ``notify()``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from analyzer import scheduler_actions
from analyzer.actions import ACTION_ORDER, Action, Held, affected_jobs, merge_decision, stronger, worse
from analyzer.budget import FleetLimits, FleetUse, awaiting_resume
from analyzer.config import AlertsConfig, WebhookConfig
from analyzer.findings import SEVERITY_ORDER
from analyzer.incident_memory import memory_details
from analyzer.incident_model import Incident, with_decision
from analyzer.outbox import enqueue
from analyzer.payloads import AlertRow, Event, alertmanager_labels, json_object, jsonable
from fabric.errors import FabricmonError
from store.db import Connection, Pool, Record
from store.scheduler_actions import Policy, release_resumes

__all__ = [
    "AlertInputError",
    "AlertRow",
    "SyncResult",
    "ack_alert",
    "get_alert",
    "incident_timeline",
    "list_alerts",
    "require_review",
    "sync_alerts",
]

AlertState = Literal["firing", "resolved", "all"]
MAX_LIST_LIMIT = 1000


class AlertInputError(FabricmonError, ValueError):
    """A bad argument: naive time, negative hold-down, unknown state, limit out of range."""


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one evaluation changed."""

    fired: int = 0
    updated: int = 0
    resolved: int = 0
    escalated: int = 0
    #: Outbox rows written (call the sender's ``notify()`` when non-zero).
    deliveries: int = 0
    #: Pending incidents held back this round.
    pending: int = 0
    #: Scheduler actions stored (wake the executors when non-zero).
    actions: int = 0


@dataclass(slots=True)
class _Sync:
    """One evaluation's transaction: the connection and what it needs to notify."""

    conn: Connection
    webhooks: Sequence[WebhookConfig]
    external_url: str | None
    schedulers: Sequence[Policy] = ()
    deliveries: int = 0
    actions: int = 0

    async def notify(self, alert: AlertRow, event: Event) -> None:
        await _timeline(self.conn, alert, "opened" if event == "alert.firing" else "resolved")
        await self.send(alert, event)

    async def send(self, alert: AlertRow, event: Event) -> None:
        if self.schedulers:
            self.actions += await scheduler_actions.enqueue(self.conn, alert, event, self.schedulers)
        if not self.webhooks:
            return
        jobs = await affected_jobs(self.conn, [str(s) for s in alert.scope.get("servers", [])])
        action: Action = alert.recommended_action if alert.recommended_action in ACTION_ORDER else "observe"  # type: ignore[assignment]
        self.deliveries += await enqueue(
            self.conn, alert, event, self.webhooks, jobs=jobs, action=action, external_url=self.external_url
        )


async def sync_alerts(
    pool: Pool,
    incidents: Sequence[Incident],
    *,
    now: datetime,
    hold_down_s: float,
    webhooks: Sequence[WebhookConfig],
    settings: AlertsConfig | None = None,
    evaluated_rules: Collection[str] | None = None,
    unobserved: Collection[str] = (),
    drain_limit: int | None = None,
    schedulers: Sequence[Policy] = (),
    idle_timeout_s: float | None = None,
    fleet: FleetLimits | None = None,
    resume_after_s: float = 0.0,
) -> SyncResult:
    """Apply one evaluation's decided incidents to the stored alerts (see the module docstring).

    ``settings`` supplies the external URL (its ``webhooks`` are not used: ``webhooks`` is).
    ``unobserved``: switches fabricmon cannot see now; an incident rooted on one is not resolved
    (its fault may well be there still). ``drain_limit``: the circuit breaker's host limit, applied
    again to what an open incident's drains add up to. ``schedulers``: the scheduler actions each
    transition stores (:mod:`analyzer.scheduler_actions`). ``idle_timeout_s``: see :func:`lock_firing`.
    ``fleet``: the drain budget and checkpoint breaker across incidents (:mod:`analyzer.budget`;
    None: no fleet limit). ``resume_after_s``: how long a resolved incident stays clean before the
    resume of its drained hosts is stored (:func:`store.scheduler_actions.release_resumes`).
    Runs in one transaction.
    """
    if now.tzinfo is None:
        raise AlertInputError("now must be timezone-aware")
    if not hold_down_s >= 0:
        raise AlertInputError(f"hold_down_s must be >= 0, got {hold_down_s!r}")
    external_url = str(settings.external_url) if settings is not None and settings.external_url else None
    current = _by_fingerprint(incidents)
    async with pool.acquire() as conn, conn.transaction():
        rows = await lock_firing(conn, idle_timeout_s)
        firing = {r["fingerprint"]: r for r in rows}
        sync = _Sync(conn, webhooks, external_url, schedulers)
        use = await _fleet_use(conn, rows, fleet) if fleet is not None else None

        # open incidents first: what they already hold is counted before a new one is admitted
        present = [(firing[fp], current[fp]) for fp in current if fp in firing]
        escalated = 0
        for alert, event in await _update(conn, present, now, drain_limit, use):
            await _timeline(conn, alert, event)
            if event == "escalated":
                escalated += 1
                await sync.send(alert, "alert.firing")

        fired = pending = 0
        for fp, inc in current.items():
            if fp in firing:
                continue
            if inc.pending:
                pending += 1
                continue
            if use is not None and not inc.needs_review and (why := use.admit(inc.action, inc.action_hosts)):
                inc = with_decision(inc, action="observe", needs_review=True, severity="critical", reason=why)
            opened = await _fire(conn, inc, now)
            if opened is not None:  # None: another analyzer opened it a moment ago
                fired += 1
                await sync.notify(opened, "alert.firing")

        cutoff = now - timedelta(seconds=hold_down_s)
        blind = frozenset(unobserved)
        gone = [
            r["id"]
            for fp, r in firing.items()
            if fp not in current
            and (evaluated_rules is None or r["rule"] in evaluated_rules)
            and r["last_seen_at"] <= cutoff
            and not _root_unseen(r, blind)
        ]
        resolved = await conn.fetch(
            """UPDATE alerts SET state = 'resolved', ended_at = $2
               WHERE id = ANY($1::bigint[]) AND state = 'firing' RETURNING *""",
            gone,
            now,
        )
        for rec in resolved:
            await sync.notify(AlertRow.from_record(rec), "alert.resolved")
        if schedulers:
            sync.actions += await release_resumes(conn, now, resume_after_s, schedulers)
    return SyncResult(
        fired=fired,
        updated=len(present),
        resolved=len(resolved),
        escalated=escalated,
        deliveries=sync.deliveries,
        pending=pending,
        actions=sync.actions,
    )


async def require_review(
    pool: Pool,
    alert_id: int,
    reason: str,
    *,
    webhooks: Sequence[WebhookConfig],
    settings: AlertsConfig | None = None,
    schedulers: Sequence[Policy] = (),
    idle_timeout_s: float | None = None,
) -> SyncResult:
    """A circuit breaker outside the analyzer's round (a scheduler's fleet-wide limit) withheld this
    firing incident's drain: it now recommends ``observe`` with ``needs_review``, critical, and
    receivers are told, as on any escalation to review. Nothing when it is not firing or already
    needs review. The analyzer's later rounds keep it so (the breaker always wins).
    ``idle_timeout_s``: as for :func:`lock_firing` (the row it updates stays locked meanwhile)."""
    external_url = str(settings.external_url) if settings is not None and settings.external_url else None
    async with pool.acquire() as conn, conn.transaction():
        await bound_idle(conn, idle_timeout_s)
        rec = await conn.fetchrow(
            """UPDATE alerts SET needs_review = true, recommended_action = 'observe', severity = 'critical',
                      reason = $2, notified_severity = 'critical', notified_action = 'observe'
               WHERE id = $1 AND state = 'firing' AND NOT needs_review RETURNING *""",
            alert_id,
            reason,
        )
        if rec is None:
            return SyncResult()
        alert = AlertRow.from_record(rec)
        sync = _Sync(conn, webhooks, external_url, schedulers)
        await _timeline(conn, alert, "escalated")
        await sync.send(alert, "alert.firing")
    return SyncResult(escalated=1, deliveries=sync.deliveries, actions=sync.actions)


def _by_fingerprint(incidents: Sequence[Incident]) -> dict[str, Incident]:
    out: dict[str, Incident] = {}
    for inc in incidents:
        seen = out.get(inc.fingerprint)
        if seen is None or SEVERITY_ORDER[inc.severity] > SEVERITY_ORDER[seen.severity]:
            out[inc.fingerprint] = inc
    return out


async def lock_firing(conn: Connection, idle_timeout_s: float | None = None) -> list[Record]:
    """The firing alerts, locked ``FOR UPDATE`` until the caller's transaction ends.
    ``idle_timeout_s`` (an electing analyzer: its lock session's idle timeout): the server ends
    this transaction once its client has been silent in it that long. A leader frozen here (SIGSTOP,
    a paused VM) then loses these row locks when it loses the analyzer lock, instead of holding up
    its successor's alert sync until it resumes or dies. ``SET LOCAL``: the rest of the session,
    which may be shared with the collector's writers (``fabricmon run``), is not touched."""
    await bound_idle(conn, idle_timeout_s)
    return list(await conn.fetch("SELECT * FROM alerts WHERE state = 'firing' ORDER BY id FOR UPDATE"))


async def bound_idle(conn: Connection, idle_timeout_s: float | None) -> None:
    """End the current transaction server-side once its client is silent in it ``idle_timeout_s``
    (None: no bound). ``SET LOCAL``: the session's own setting is back at the transaction's end."""
    if idle_timeout_s is not None:
        ms = max(1, math.ceil(idle_timeout_s * 1000))
        await conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {ms}")


async def firing_details(conn: Connection) -> list[dict[str, Any]]:
    """The ``details`` of every firing alert: what :func:`analyzer.correlation.correlate` continues
    incidents by (:func:`~analyzer.incident_memory.ongoing_storms`, :func:`~analyzer.incident_memory.held_links`)."""
    rows = await conn.fetch("SELECT details FROM alerts WHERE state = 'firing'")
    return [json_object(r["details"]) for r in rows]


async def _fleet_use(conn: Connection, firing: Sequence[Record], limits: FleetLimits) -> FleetUse:
    """What open incidents (and resolved ones not resumed yet) already hold against the fleet limits."""
    use = FleetUse(limits)
    for r in firing:
        if not r["needs_review"]:
            use.hold(r["recommended_action"] or "observe", r["action_hosts"] or ())
    use.hold("drain", await awaiting_resume(conn))
    return use


def notified_servers(stored: Any, scope: Any = None) -> set[str]:
    """The servers receivers were told a firing incident touches (``details.notified_servers``;
    an alert stored before it was kept: its scope's servers)."""
    told = json_object(stored).get("notified_servers")
    if isinstance(told, list):
        return {str(s) for s in told}
    servers = json_object(scope).get("servers")
    return {str(s) for s in servers} if isinstance(servers, list) else set()


def _fields(inc: Incident, stored: Any = None, notified: Collection[str] | None = None) -> dict[str, Any]:
    """The stored columns of ``inc``; ``stored``: the firing alert's ``details`` before this update
    (the links a switch incident held are kept while it fires: a later round may see fewer);
    ``notified``: the servers receivers have been told of (its scope's when it opens)."""
    return {
        "summary": inc.summary,
        "scope": _json(inc.scope.as_dict()),
        "details": _json(
            {
                **inc.root.details,
                "reason": inc.reason,
                "efficiency_loss": inc.efficiency_loss,
                **({"maintenance_windows": list(inc.windows)} if inc.maintenance else {}),
                **memory_details(inc, json_object(stored)),
                "notified_servers": sorted(inc.scope.servers if notified is None else notified),
            }
        ),
        "root_cause": _json(inc.root_cause),
        "symptoms": _json(inc.symptom_list()),
    }


async def _fire(conn: Connection, inc: Incident, now: datetime) -> AlertRow | None:
    f = _fields(inc)
    rec = await conn.fetchrow(
        """INSERT INTO alerts (fingerprint, rule, severity, state, summary, scope, details, started_at,
                               last_seen_at, recommended_action, notified_severity, notified_action,
                               root_cause, symptoms, needs_review, action_hosts, reason, maintenance)
           VALUES ($1, $2, $3, 'firing', $4, $5::jsonb, $6::jsonb, $7, $7, $8, $3, $8,
                   $9::jsonb, $10::jsonb, $11, $12::text[], $13, $14)
           ON CONFLICT (fingerprint) WHERE state = 'firing' DO NOTHING
           RETURNING *""",
        inc.fingerprint,
        inc.rule,
        inc.severity,
        f["summary"],
        f["scope"],
        f["details"],
        now,
        inc.action,
        f["root_cause"],
        f["symptoms"],
        inc.needs_review,
        list(inc.action_hosts),
        inc.reason,
        inc.maintenance,
    )
    if rec is None:
        return None
    alert = AlertRow.from_record(rec)
    labels = alertmanager_labels(alert)
    await conn.execute("UPDATE alerts SET labels = $2::jsonb WHERE id = $1", alert.id, _json(labels))
    return AlertRow.from_record({**dict(rec), "labels": labels})


async def _update(
    conn: Connection,
    present: Sequence[tuple[Record, Incident]],
    now: datetime,
    drain_limit: int | None,
    use: FleetUse | None = None,
) -> list[tuple[AlertRow, str]]:
    """Refresh still-present incidents in one statement; returns the ones that escalated or changed."""
    if not present:
        return []
    keys = ("id", "rule", "sev", "action", "hosts", "review", "reason", "nsev", "nact", "summary", "scope",
            "details", "root", "symptoms", "maint")  # fmt: skip
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
        told_servers = notified_servers(rec["details"], rec["scope"])
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
        f = _fields(inc, rec["details"], told_servers | set(inc.scope.servers))
        for key, value in (
            ("id", rec["id"]),
            ("rule", inc.rule),
            ("sev", severity),
            ("action", action),
            ("hosts", _json(hosts)),
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
        ):
            cols[key].append(value)
    rows = await conn.fetch(
        """UPDATE alerts a SET last_seen_at = GREATEST(a.last_seen_at, $15), rule = u.rule, severity = u.sev,
                  recommended_action = u.action,
                  action_hosts = ARRAY(SELECT jsonb_array_elements_text(u.hosts::jsonb)),
                  needs_review = u.review, reason = u.reason, notified_severity = u.nsev,
                  notified_action = u.nact, summary = u.summary, scope = u.scope::jsonb,
                  details = u.details::jsonb, root_cause = u.root::jsonb, symptoms = u.symptoms::jsonb,
                  maintenance = u.maint
           FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[],
                       $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                       $16::boolean[])
                AS u(id, rule, sev, action, hosts, review, reason, nsev, nact, summary, scope, details, root, symptoms,
                     maint)
           WHERE a.id = u.id AND a.state = 'firing'
           RETURNING a.*""",
        *list(cols.values())[:-1],
        now,
        cols["maint"],
    )
    return [(AlertRow.from_record(r), events[r["id"]]) for r in rows if r["id"] in events]


async def _timeline(conn: Connection, alert: AlertRow, event: str) -> None:
    await conn.execute(
        """INSERT INTO incident_events (alert_id, time, event, severity, action, rule, summary, symptoms)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)""",
        alert.id,
        alert.ended_at if event == "resolved" and alert.ended_at is not None else alert.last_seen_at,
        event,
        alert.severity,
        alert.recommended_action or "observe",
        alert.rule,
        alert.summary,
        len(alert.symptoms),
    )


async def incident_timeline(pool: Pool, alert_id: int) -> list[dict[str, Any]]:
    """An incident's timeline, oldest first: ``[{time, event, severity, action, rule, summary, symptoms}]``."""
    rows = await pool.fetch(
        "SELECT time, event, severity, action, rule, summary, symptoms FROM incident_events "
        "WHERE alert_id = $1 ORDER BY time, id",
        alert_id,
    )
    return [{**dict(r), "time": r["time"]} for r in rows]


def _root_unseen(rec: Record, unobserved: frozenset[str]) -> bool:
    """Whether an incident's root cause sits on a switch fabricmon cannot observe now (the
    collection incident itself is about exactly that, and resolves as collection recovers)."""
    if rec["rule"] == "collection" or not unobserved:
        return False
    root = rec["root_cause"]
    switch = (json.loads(root) if isinstance(root, str | bytes) else dict(root or {})).get("switch")
    return isinstance(switch, str) and switch in unobserved


def _loaded(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return [dict(v) for v in value] if isinstance(value, list) else []


def _json(value: Any) -> str:
    return json.dumps(jsonable(value), separators=(",", ":"), allow_nan=False)


async def list_alerts(
    pool: Pool, state: AlertState = "firing", limit: int = 100, offset: int = 0
) -> list[dict[str, Any]]:
    """Alerts as the API shows them (newest first): SPEC §4's fields plus details, last seen and ack."""
    if state not in ("firing", "resolved", "all"):
        raise AlertInputError(f"state must be firing, resolved or all, got {state!r}")
    if isinstance(limit, bool) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise AlertInputError(f"limit must be between 1 and {MAX_LIST_LIMIT}, got {limit!r}")
    if isinstance(offset, bool) or offset < 0:
        raise AlertInputError(f"offset must be >= 0, got {offset!r}")
    rows = await pool.fetch(
        """SELECT * FROM alerts WHERE $1 = 'all' OR state = $1
           ORDER BY started_at DESC, id DESC LIMIT $2 OFFSET $3""",
        state,
        limit,
        offset,
    )
    return [AlertRow.from_record(r).as_json() for r in rows]


async def get_alert(pool: Pool, alert_id: int) -> AlertRow | None:
    """One alert by id."""
    rec = await pool.fetchrow("SELECT * FROM alerts WHERE id = $1", alert_id)
    return AlertRow.from_record(rec) if rec is not None else None


async def ack_alert(pool: Pool, alert_id: int, by: str | None) -> AlertRow | None:
    """Acknowledge an alert (the first acknowledgement stands); None if there is no such alert."""
    rec = await pool.fetchrow(
        """UPDATE alerts SET acked_by = CASE WHEN acked_at IS NULL THEN $2 ELSE acked_by END,
                             acked_at = COALESCE(acked_at, now())
           WHERE id = $1 RETURNING *""",
        alert_id,
        by[:200] if by is not None else None,
    )
    return AlertRow.from_record(rec) if rec is not None else None
