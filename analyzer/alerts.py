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
  servers receivers were not told of: column ``notified_servers``, once per growth). One more
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
Acknowledging (:func:`analyzer.alert_queries.ack_alert`) is for people and sends nothing.
After a sync that enqueued deliveries, call the sender's ``notify()``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from analyzer import scheduler_actions
from analyzer.actions import ACTION_ORDER, Action, affected_jobs
from analyzer.alert_queries import AlertInputError
from analyzer.alert_update import stored_fields, to_json, update_present
from analyzer.budget import FleetLimits, FleetUse, awaiting_resume
from analyzer.config import AlertsConfig, WebhookConfig
from analyzer.findings import SEVERITY_ORDER
from analyzer.incident_memory import memory_of
from analyzer.incident_model import Incident, with_decision
from analyzer.outbox import enqueue
from analyzer.payloads import AlertRow, Event, alertmanager_labels
from store.db import Connection, Pool, Record
from store.incident_memory import forget, remember
from store.scheduler_actions import Policy, release_resumes

__all__ = [
    "AlertInputError",
    "AlertRow",
    "SyncResult",
    "require_review",
    "sync_alerts",
]


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
    #: The firing alerts once the sync is done (by id): the round's one read of them.
    firing: tuple[AlertRow, ...] = field(default=(), repr=False)


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
        after = {r["id"]: AlertRow.from_record(r) for r in rows}  # the firing alerts once this sync is done
        remembered = [memory_of(inc, rec["id"]) for rec, inc in present]
        escalated = 0
        updated, events = await update_present(conn, present, now, drain_limit, use)
        after.update((a.id, a) for a in updated)
        for alert, event in events:
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
                after[opened.id] = opened
                remembered.append(memory_of(inc, opened.id))
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
            after.pop(rec["id"], None)
            await sync.notify(AlertRow.from_record(rec), "alert.resolved")
        await remember(conn, remembered, now)
        await forget(conn, [rec["id"] for rec in resolved])
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
        firing=tuple(after[i] for i in sorted(after)),
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


async def _fleet_use(conn: Connection, firing: Sequence[Record], limits: FleetLimits) -> FleetUse:
    """What open incidents (and resolved ones not resumed yet) already hold against the fleet limits."""
    use = FleetUse(limits)
    for r in firing:
        if not r["needs_review"]:
            use.hold(r["recommended_action"] or "observe", r["action_hosts"] or ())
    use.hold("drain", await awaiting_resume(conn))
    return use


async def _fire(conn: Connection, inc: Incident, now: datetime) -> AlertRow | None:
    f = stored_fields(inc)
    rec = await conn.fetchrow(
        """INSERT INTO alerts (fingerprint, rule, severity, state, summary, scope, details, started_at,
                               last_seen_at, recommended_action, notified_severity, notified_action,
                               root_cause, symptoms, needs_review, action_hosts, reason, maintenance,
                               notified_servers)
           VALUES ($1, $2, $3, 'firing', $4, $5::jsonb, $6::jsonb, $7, $7, $8, $3, $8,
                   $9::jsonb, $10::jsonb, $11, $12::text[], $13, $14, $15::text[])
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
        sorted(inc.scope.servers),
    )
    if rec is None:
        return None
    alert = AlertRow.from_record(rec)
    labels = alertmanager_labels(alert)
    await conn.execute("UPDATE alerts SET labels = $2::jsonb WHERE id = $1", alert.id, to_json(labels))
    return AlertRow.from_record({**dict(rec), "labels": labels})


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


def _root_unseen(rec: Record, unobserved: frozenset[str]) -> bool:
    """Whether an incident's root cause sits on a switch fabricmon cannot observe now (the
    collection incident itself is about exactly that, and resolves as collection recovers)."""
    if rec["rule"] == "collection" or not unobserved:
        return False
    root = rec["root_cause"]
    switch = (json.loads(root) if isinstance(root, str | bytes) else dict(root or {})).get("switch")
    return isinstance(switch, str) and switch in unobserved
