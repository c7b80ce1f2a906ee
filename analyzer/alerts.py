"""The alert lifecycle: findings in, firing/resolved alerts and their webhook deliveries out.

Each evaluation calls :func:`sync_alerts` with everything the checks found. In one
transaction, holding the firing alerts' row locks (so two analyzers take turns):

* a finding whose fingerprint has no firing alert **fires**: a new ``alerts`` row
  (``started_at = last_seen_at = now``) and one ``alert.firing`` delivery per webhook;
* a firing alert whose finding is present is **updated**: ``last_seen_at``, severity, summary,
  scope, details and the recommended action follow the latest finding. No delivery, except on
  **escalation**: when the severity or the recommended action rises above the highest one any
  receiver was told about (``notified_severity``/``notified_action``), one more
  ``alert.firing`` delivery carries the new state (same alert id). A severity that drops and
  rises again does not notify twice, so a see-sawing finding cannot storm receivers;
* a firing alert whose finding has been absent for at least ``hold_down_s`` since
  ``last_seen_at`` **resolves** (``ended_at = now``, the time the resolution was decided) with one
  ``alert.resolved`` delivery per webhook. Absent for less: still firing (hysteresis).

All state is in the database: a restarted analyzer finds its firing alerts there, so it neither
re-fires (the unique partial index ``alerts_one_firing``) nor forgets them. Several findings
with one fingerprint in one evaluation count once (the most severe). With
``evaluated_rules``, alerts of rules whose check did not run this time (it failed, or is
disabled) are left alone instead of resolving. Acknowledging (:func:`ack_alert`) is for people
and sends nothing. After a sync that enqueued deliveries, call the sender's ``notify()``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from analyzer.actions import (
    ACTION_ORDER,
    Action,
    ActionPolicy,
    Placement,
    affected_jobs,
    load_placement,
    recommended_action,
)
from analyzer.config import AlertsConfig, WebhookConfig
from analyzer.findings import SEVERITY_ORDER, Finding
from analyzer.outbox import enqueue
from analyzer.payloads import AlertRow, Event, jsonable
from fabric.errors import FabricmonError
from store.db import Connection, Pool, Record

__all__ = ["AlertInputError", "AlertRow", "SyncResult", "ack_alert", "get_alert", "list_alerts", "sync_alerts"]

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


@dataclass(slots=True)
class _Sync:
    """One evaluation's transaction: the connection and what it needs to notify."""

    conn: Connection
    webhooks: Sequence[WebhookConfig]
    external_url: str | None
    deliveries: int = 0

    async def notify(self, alert: AlertRow, event: Event, action: Action) -> None:
        if not self.webhooks:
            return
        jobs = await affected_jobs(self.conn, [str(s) for s in alert.scope.get("servers", [])])
        self.deliveries += await enqueue(
            self.conn, alert, event, self.webhooks, jobs=jobs, action=action, external_url=self.external_url
        )


async def sync_alerts(
    pool: Pool,
    findings: Sequence[Finding],
    *,
    now: datetime,
    hold_down_s: float,
    webhooks: Sequence[WebhookConfig],
    settings: AlertsConfig | None = None,
    evaluated_rules: Collection[str] | None = None,
) -> SyncResult:
    """Apply one evaluation's findings to the stored alerts (see the module docstring).

    ``settings`` supplies the ``checkpoint`` thresholds and the external URL (its ``webhooks``
    are not used: ``webhooks`` is). Runs in one transaction.
    """
    if now.tzinfo is None:
        raise AlertInputError("now must be timezone-aware")
    if not hold_down_s >= 0:
        raise AlertInputError(f"hold_down_s must be >= 0, got {hold_down_s!r}")
    policy = ActionPolicy.from_config(settings) if settings is not None else ActionPolicy()
    external_url = str(settings.external_url) if settings is not None and settings.external_url else None
    current = _by_fingerprint(findings)
    async with pool.acquire() as conn, conn.transaction():
        rows = await conn.fetch("SELECT * FROM alerts WHERE state = 'firing' ORDER BY id FOR UPDATE")
        firing = {r["fingerprint"]: r for r in rows}
        placement = await load_placement(conn, [(f.rule, f.scope.as_dict()) for f in current.values()])
        actions = {fp: _action(f, placement, policy) for fp, f in current.items()}
        sync = _Sync(conn, webhooks, external_url)

        fired = 0
        for fp, finding in current.items():
            if fp not in firing:
                alert = await _fire(conn, finding, actions[fp], now)
                if alert is not None:  # None: another analyzer fired it a moment ago
                    fired += 1
                    await sync.notify(alert, "alert.firing", actions[fp])

        present = [(firing[fp], current[fp], actions[fp]) for fp in current if fp in firing]
        escalated = 0
        for alert, action in await _update(conn, present, now):
            escalated += 1
            await sync.notify(alert, "alert.firing", action)

        cutoff = now - timedelta(seconds=hold_down_s)
        gone = [
            r["id"]
            for fp, r in firing.items()
            if fp not in current
            and (evaluated_rules is None or r["rule"] in evaluated_rules)
            and r["last_seen_at"] <= cutoff
        ]
        resolved = await conn.fetch(
            """UPDATE alerts SET state = 'resolved', ended_at = $2
               WHERE id = ANY($1::bigint[]) AND state = 'firing' RETURNING *""",
            gone,
            now,
        )
        for rec in resolved:
            await sync.notify(AlertRow.from_record(rec), "alert.resolved", "observe")
    return SyncResult(
        fired=fired, updated=len(present), resolved=len(resolved), escalated=escalated, deliveries=sync.deliveries
    )


def _by_fingerprint(findings: Sequence[Finding]) -> dict[str, Finding]:
    out: dict[str, Finding] = {}
    for f in findings:
        seen = out.get(f.fingerprint)
        if seen is None or SEVERITY_ORDER[f.severity] > SEVERITY_ORDER[seen.severity]:
            out[f.fingerprint] = f
    return out


def _action(finding: Finding, placement: Placement, policy: ActionPolicy) -> Action:
    return recommended_action(
        finding.rule, finding.severity, finding.scope.as_dict(), finding.details, placement=placement, policy=policy
    )


async def _fire(conn: Connection, finding: Finding, action: Action, now: datetime) -> AlertRow | None:
    rec = await conn.fetchrow(
        """INSERT INTO alerts (fingerprint, rule, severity, state, summary, scope, details, started_at,
                               last_seen_at, recommended_action, notified_severity, notified_action)
           VALUES ($1, $2, $3, 'firing', $4, $5::jsonb, $6::jsonb, $7, $7, $8, $3, $8)
           ON CONFLICT (fingerprint) WHERE state = 'firing' DO NOTHING
           RETURNING *""",
        finding.fingerprint,
        finding.rule,
        finding.severity,
        finding.summary,
        _json(finding.scope.as_dict()),
        _json(finding.details),
        now,
        action,
    )
    return AlertRow.from_record(rec) if rec is not None else None


async def _update(
    conn: Connection, present: Sequence[tuple[Record, Finding, Action]], now: datetime
) -> list[tuple[AlertRow, Action]]:
    """Refresh still-present alerts in one statement; returns the ones that escalated."""
    if not present:
        return []
    cols: dict[str, list[Any]] = {k: [] for k in ("id", "sev", "summary", "scope", "details", "action", "nsev", "nact")}
    escalating: dict[int, Action] = {}
    for rec, finding, action in present:
        told_sev = rec["notified_severity"] or rec["severity"]
        told_act = rec["notified_action"] or rec["recommended_action"] or action
        if SEVERITY_ORDER[finding.severity] > SEVERITY_ORDER[told_sev] or ACTION_ORDER[action] > ACTION_ORDER[told_act]:
            escalating[rec["id"]] = action
        for key, value in (
            ("id", rec["id"]),
            ("sev", finding.severity),
            ("summary", finding.summary),
            ("scope", _json(finding.scope.as_dict())),
            ("details", _json(finding.details)),
            ("action", action),
            ("nsev", max(finding.severity, told_sev, key=SEVERITY_ORDER.__getitem__)),
            ("nact", max(action, told_act, key=ACTION_ORDER.__getitem__)),
        ):
            cols[key].append(value)
    rows = await conn.fetch(
        """UPDATE alerts a SET last_seen_at = GREATEST(a.last_seen_at, $9), severity = u.sev, summary = u.summary,
                  scope = u.scope::jsonb, details = u.details::jsonb, recommended_action = u.action,
                  notified_severity = u.nsev, notified_action = u.nact
           FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                       $8::text[]) AS u(id, sev, summary, scope, details, action, nsev, nact)
           WHERE a.id = u.id AND a.state = 'firing'
           RETURNING a.*""",
        *cols.values(),
        now,
    )
    return [(AlertRow.from_record(r), escalating[r["id"]]) for r in rows if r["id"] in escalating]


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
