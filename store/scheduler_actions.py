"""The ``scheduler_actions`` table (migrations 014 and 022): the outbox and the audit trail of
scheduler actions. This module holds the table's SQL and rows, and is its only writer.

The analyzer stores actions inside the transaction that opens, escalates or resolves an incident
(:func:`insert`, :func:`release_resumes`; what a transition asks for is decided in
:mod:`analyzer.scheduler_actions`), so an incident and the drain it asks for commit or vanish
together, exactly as its webhook deliveries do. An executor (:mod:`schedulers.executor`) claims
the oldest pending row of its scheduler only (:func:`claim`): actions run in the order they were
decided, so a resume never overtakes its drain, and a second executor waits rather than reorders.
The claim is a lease (``next_attempt_at`` moves past the command's deadline): an executor that
dies mid-action leaves the row to be retried when the lease ends. Every outcome is recorded
(:func:`record`) and rows are kept: ``GET /v1/actions`` lists them.

When an executor's own fleet breaker withholds an action, it records why in the row
(``review_reason``); the analyzer's next round reads those (:func:`withheld_for_review`) and turns
the incident to review. The executor never calls back into the analyzer.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from store.db import Connection, Pool, Record

ActionKind = Literal["drain", "resume", "checkpoint"]
Status = Literal["pending", "done", "failed", "withheld", "dry_run"]
STATUSES: tuple[Status, ...] = ("pending", "done", "failed", "withheld", "dry_run")
#: The prefix of every reason fabricmon gives Slurm: a node whose reason starts otherwise is not ours.
REASON_PREFIX = "fabricmon:"


@dataclass(frozen=True, slots=True)
class Policy:
    """What one scheduler is asked to do (from its config section)."""

    scheduler: str
    drain: bool = True
    checkpoint: bool = False


@dataclass(frozen=True, slots=True)
class ActionRow:
    """One row of ``scheduler_actions``."""

    id: uuid.UUID
    seq: int
    alert_id: int | None
    scheduler: str
    action: ActionKind
    hosts: tuple[str, ...]
    reason: str
    status: Status
    attempts: int
    refusals: int
    created_at: datetime
    done_at: datetime | None
    nodes: tuple[str, ...]
    commands: tuple[str, ...]
    result: dict[str, Any] | None
    last_error: str | None

    @classmethod
    def from_record(cls, r: Record) -> ActionRow:
        result = r["result"]
        return cls(
            id=r["id"],
            seq=r["seq"],
            alert_id=r["alert_id"],
            scheduler=r["scheduler"],
            action=r["action"],
            hosts=tuple(r["hosts"]),
            reason=r["reason"],
            status=r["status"],
            attempts=r["attempts"],
            refusals=r["refusals"],
            created_at=r["created_at"],
            done_at=r["done_at"],
            nodes=tuple(r["nodes"]),
            commands=tuple(r["commands"]),
            result=json.loads(result) if isinstance(result, str) else result,
            last_error=r["last_error"],
        )

    def as_json(self) -> dict[str, Any]:
        """The API's object (``GET /v1/actions``)."""
        return {
            "id": str(self.id),
            "time": self.created_at.isoformat(),
            "incident": self.alert_id,
            "scheduler": self.scheduler,
            "action": self.action,
            "status": self.status,
            "hosts": list(self.hosts),
            "nodes": list(self.nodes),
            "reason": self.reason,
            "commands": list(self.commands),
            "result": self.result,
            "attempts": self.attempts,
            "last_error": self.last_error,
            "done_at": self.done_at.isoformat() if self.done_at else None,
        }


async def insert(
    conn: Connection,
    alert_id: int,
    scheduler: str,
    action: ActionKind,
    hosts: Sequence[str],
    reason: str,
    status: Status,
) -> None:
    """Store one action of an incident (call inside its transition's transaction)."""
    await conn.execute(
        """INSERT INTO scheduler_actions (id, alert_id, scheduler, action, hosts, reason, status, done_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, CASE WHEN $7 = 'pending' THEN NULL ELSE now() END)""",
        uuid.uuid4(),
        alert_id,
        scheduler,
        action,
        sorted(set(hosts)),
        reason,
        status,
    )


async def hosts_of(conn: Connection, alert_id: int, scheduler: str, action: str, statuses: Sequence[str]) -> set[str]:
    """The hosts this incident's earlier ``action`` rows of these statuses named."""
    hosts = await conn.fetchval(
        """SELECT coalesce(array_agg(DISTINCT h), '{}') FROM scheduler_actions, unnest(hosts) AS h
           WHERE alert_id = $1 AND scheduler = $2 AND action = $3 AND status = ANY($4::text[])""",
        alert_id,
        scheduler,
        action,
        list(statuses),
    )
    return set(hosts)


async def release_resumes(conn: Connection, now: datetime, resume_after_s: float, policies: Sequence[Policy]) -> int:
    """Store the resume of every resolved incident that has stayed resolved ``resume_after_s`` by
    ``now`` without re-opening (call inside the sync's transaction); how many rows were stored.

    The resume names every host this incident's drains named (pending, done, dry run or failed: a
    failed drain may have drained some nodes before it failed, scontrol applying a multi-node
    update node by node; the executor checks each node anyway). An incident whose place fired
    again (a later alert of the same fingerprint) that is still firing, or resolved less than
    ``resume_after_s`` ago, keeps its hosts drained: a re-open within the window cancels the
    resume, which then waits for the re-opened incident to stay clean in turn. A host is never
    left drained for good by a flap, and never resumed into a fault that came back."""
    cutoff = now - timedelta(seconds=resume_after_s)
    n = 0
    for p in policies:
        rows = await conn.fetch(
            """SELECT a.id, array_agg(DISTINCT h ORDER BY h) AS hosts
               FROM alerts a JOIN scheduler_actions d ON d.alert_id = a.id, unnest(d.hosts) AS h
               WHERE a.state = 'resolved' AND a.ended_at <= $2 AND d.scheduler = $1 AND d.action = 'drain'
                 AND d.status IN ('pending', 'done', 'dry_run', 'failed')
                 AND NOT EXISTS (SELECT 1 FROM scheduler_actions r
                                 WHERE r.alert_id = a.id AND r.scheduler = $1 AND r.action = 'resume')
                 AND NOT EXISTS (SELECT 1 FROM alerts b
                                 WHERE b.fingerprint = a.fingerprint AND b.id > a.id
                                   AND (b.state = 'firing' OR b.ended_at > $2))
               GROUP BY a.id ORDER BY a.id""",
            p.scheduler,
            cutoff,
        )
        for r in rows:
            clean = f" and stayed clean for {resume_after_s:g} s" if resume_after_s else ""
            why = f"incident {r['id']} resolved{clean}"
            await insert(conn, r["id"], p.scheduler, "resume", list(r["hosts"]), why, "pending")
            n += 1
    return n


async def claim(pool: Pool, scheduler: str, lease_s: float) -> ActionRow | None:
    """The oldest pending action of ``scheduler`` if it is due, leased for ``lease_s``; else None."""
    row = await pool.fetchrow(
        """WITH head AS (
               SELECT id, next_attempt_at FROM scheduler_actions
               WHERE scheduler = $1 AND status = 'pending' ORDER BY seq LIMIT 1 FOR UPDATE
           )
           UPDATE scheduler_actions a SET attempts = a.attempts + 1,
                  next_attempt_at = now() + make_interval(secs => $2::float8)
           FROM head WHERE a.id = head.id AND head.next_attempt_at <= now()
           RETURNING a.*""",
        scheduler,
        lease_s,
    )
    return None if row is None else ActionRow.from_record(row)


async def next_due(pool: Pool, scheduler: str) -> datetime | None:
    """When the head of ``scheduler``'s queue is due (None: nothing pending)."""
    value: datetime | None = await pool.fetchval(
        """SELECT next_attempt_at FROM scheduler_actions WHERE scheduler = $1 AND status = 'pending'
           ORDER BY seq LIMIT 1""",
        scheduler,
    )
    return value


async def record(
    pool: Pool,
    row: ActionRow,
    status: Status,
    *,
    nodes: Sequence[str] = (),
    commands: Sequence[str] | None = None,
    result: dict[str, Any] | None = None,
    error: str | None = None,
    retry_in_s: float | None = None,
    refused: bool = False,
    review_reason: str | None = None,
) -> bool:
    """The outcome of the attempt that claimed ``row``; ``pending`` with ``retry_in_s`` schedules the
    next one, ``commands=None`` keeps those recorded so far. ``review_reason``: the executor's own
    breaker withheld it and the incident needs review for this reason (:func:`withheld_for_review`).
    Fenced by the claim: False (and nothing written) when the row is no longer that attempt's (its
    lease ran out and another took it)."""
    done = await pool.fetchval(
        """UPDATE scheduler_actions SET status = $2, nodes = $3, commands = coalesce($4, commands),
                  result = coalesce($5::jsonb, result), last_error = $6, review_reason = $10,
                  refusals = CASE WHEN $7 THEN refusals + 1 ELSE 0 END,
                  next_attempt_at = CASE WHEN $8::float8 IS NULL THEN next_attempt_at
                                         ELSE now() + make_interval(secs => $8::float8) END,
                  done_at = CASE WHEN $2 = 'pending' THEN NULL ELSE now() END
           WHERE id = $1 AND status = 'pending' AND attempts = $9
           RETURNING true""",
        row.id,
        status,
        list(nodes),
        None if commands is None else list(commands),
        None if result is None else json.dumps(result),
        error,
        refused,
        retry_in_s,
        row.attempts,
        review_reason,
    )
    return bool(done)


async def renew(pool: Pool, row: ActionRow, lease_s: float) -> bool:
    """Extend the claim on ``row`` by ``lease_s`` from now; False when it is no longer ours."""
    done = await pool.fetchval(
        """UPDATE scheduler_actions SET next_attempt_at = now() + make_interval(secs => $3::float8)
           WHERE id = $1 AND status = 'pending' AND attempts = $2 RETURNING true""",
        row.id,
        row.attempts,
        lease_s,
    )
    return bool(done)


async def note_commands(pool: Pool, row: ActionRow, commands: Sequence[str]) -> None:
    """Record the commands run so far (a checkpoint's signals, one by one) within the claim."""
    await pool.execute(
        "UPDATE scheduler_actions SET commands = $3 WHERE id = $1 AND status = 'pending' AND attempts = $2",
        row.id,
        row.attempts,
        list(commands),
    )


async def held_elsewhere(
    conn: Pool | Connection, alert_id: int | None, scheduler: str, hosts: Sequence[str]
) -> dict[str, int]:
    """Hosts of ``hosts`` that another *firing* incident's drain still holds, with that incident's id."""
    rows = await conn.fetch(
        """SELECT DISTINCT ON (h) h, a.alert_id FROM scheduler_actions a JOIN alerts l ON l.id = a.alert_id,
                  unnest(a.hosts) AS h
           WHERE a.scheduler = $1 AND a.action = 'drain' AND a.status IN ('pending', 'done')
             AND l.state = 'firing' AND a.alert_id IS DISTINCT FROM $2 AND h = ANY($3::text[])
           ORDER BY h, a.alert_id""",
        scheduler,
        alert_id,
        list(hosts),
    )
    return {r["h"]: r["alert_id"] for r in rows}


async def incident_state(conn: Pool | Connection, alert_id: int | None) -> tuple[str, bool]:
    """(``firing`` | ``resolved``, needs review) of the incident an action belongs to; an action of
    no incident (its alert deleted) reads as firing, not needing review."""
    if alert_id is None:
        return "firing", False
    row = await conn.fetchrow("SELECT state, needs_review FROM alerts WHERE id = $1", alert_id)
    if row is None:
        return "firing", False
    return str(row["state"]), bool(row["needs_review"])


async def list_actions(
    pool: Pool,
    *,
    limit: int = 100,
    offset: int = 0,
    incident: int | None = None,
    status: str | None = None,
) -> tuple[list[ActionRow], int]:
    """One page of actions, newest first, and how many match."""
    rows = await pool.fetch(
        """SELECT *, count(*) OVER () AS total FROM scheduler_actions
           WHERE ($3::bigint IS NULL OR alert_id = $3) AND ($4::text IS NULL OR status = $4)
           ORDER BY seq DESC LIMIT $1 OFFSET $2""",
        limit,
        offset,
        incident,
        status,
    )
    if rows:
        return [ActionRow.from_record(r) for r in rows], int(rows[0]["total"])
    total = await pool.fetchval(
        """SELECT count(*) FROM scheduler_actions
           WHERE ($1::bigint IS NULL OR alert_id = $1) AND ($2::text IS NULL OR status = $2)""",
        incident,
        status,
    )
    return [], int(total)


async def status_counts(pool: Pool) -> list[tuple[str, str, int]]:
    """``(scheduler, status, rows)`` for ``/metrics``."""
    rows = await pool.fetch(
        "SELECT scheduler, status, count(*) AS n FROM scheduler_actions GROUP BY 1, 2 ORDER BY 1, 2"
    )
    return [(r["scheduler"], r["status"], int(r["n"])) for r in rows]


async def withheld_for_review(db: Pool | Connection) -> list[tuple[int, str]]:
    """``(incident id, why)`` of each firing incident, not yet under review, one of whose actions an
    executor's breaker withheld (:func:`record` with ``review_reason``), oldest action first."""
    rows = await db.fetch(
        """SELECT DISTINCT ON (a.alert_id) a.alert_id, a.review_reason
           FROM scheduler_actions a JOIN alerts l ON l.id = a.alert_id
           WHERE a.review_reason IS NOT NULL AND l.state = 'firing' AND NOT l.needs_review
           ORDER BY a.alert_id, a.seq"""
    )
    return [(int(r["alert_id"]), str(r["review_reason"])) for r in rows]


__all__ = [
    "REASON_PREFIX",
    "STATUSES",
    "ActionRow",
    "Policy",
    "claim",
    "held_elsewhere",
    "hosts_of",
    "incident_state",
    "insert",
    "list_actions",
    "next_due",
    "note_commands",
    "record",
    "release_resumes",
    "renew",
    "status_counts",
    "withheld_for_review",
]
