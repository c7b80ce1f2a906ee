"""The webhook outbox: deliveries stored in the alert transition's own transaction (SPEC §5).

:func:`enqueue` runs inside the transaction that fires or resolves an alert and inserts one
``webhook_deliveries`` row per receiver, holding the exact body bytes that will be signed and
sent, so a transition and its notifications commit or vanish together; the senders
(:mod:`analyzer.webhooks`) pick them up from there. The row id is the
``X-Fabricmon-Delivery`` header on every attempt. A firing delivery not sent yet when a later
transition of the same incident is stored for the same receiver is ``superseded`` then: the later
body says what is true now (a drain held back by a breaker since, or an incident resolved since,
is never sent as it was, not even by a sender that restarts).

A receiver is identified in the table by :func:`webhook_key`, a hash of its URL and format:
never its secret, and never the URL itself (which may carry credentials). Changing a
webhook's URL or format makes it a new receiver: the old one's pending rows stay ``pending``
(and counted) until they are deleted or the old entry is configured again.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Any

from analyzer.actions import Action, AffectedJob
from analyzer.config import WebhookConfig
from analyzer.payloads import AlertRow, Event, body_for
from store.db import Connection, Pool


def webhook_key(webhook: WebhookConfig) -> str:
    """The receiver's key in ``webhook_deliveries.webhook``: derived from URL and format only."""
    return hashlib.sha256(f"{webhook.format}|{webhook.url}".encode()).hexdigest()[:16]


def unique_webhooks(webhooks: Sequence[WebhookConfig]) -> list[WebhookConfig]:
    """``webhooks`` with repeated receivers (same key) dropped, first one kept."""
    seen: set[str] = set()
    out: list[WebhookConfig] = []
    for wh in webhooks:
        key = webhook_key(wh)
        if key not in seen:
            seen.add(key)
            out.append(wh)
    return out


async def enqueue(
    conn: Connection,
    alert: AlertRow,
    event: Event,
    webhooks: Sequence[WebhookConfig],
    *,
    jobs: Sequence[AffectedJob],
    action: Action,
    external_url: str | None = None,
) -> int:
    """Store one delivery of ``event`` per receiver (call inside the transition's transaction)."""
    receivers = unique_webhooks(webhooks)
    if not receivers:
        return 0
    bodies: dict[str, bytes] = {}
    ids: list[uuid.UUID] = []
    keys: list[str] = []
    payloads: list[bytes] = []
    for wh in receivers:
        if wh.format not in bodies:
            bodies[wh.format] = body_for(wh.format, event, alert, jobs, action, external_url)
        ids.append(uuid.uuid4())
        keys.append(webhook_key(wh))
        payloads.append(bodies[wh.format])
    # what receivers have not been sent yet of this incident is stale now: never sent (nor replayed
    # after a restart); a delivery in flight may still arrive, and receivers dedupe by incident
    await conn.execute(
        """UPDATE webhook_deliveries SET status = 'superseded'
           WHERE alert_id = $1 AND webhook = ANY($2::text[]) AND status = 'pending' AND event = 'alert.firing'""",
        alert.id,
        keys,
    )
    await conn.execute(
        """INSERT INTO webhook_deliveries (id, alert_id, webhook, event, body)
           SELECT d.id, $2, d.webhook, $3, d.body
           FROM unnest($1::uuid[], $4::text[], $5::bytea[]) AS d(id, webhook, body)""",
        ids,
        alert.id,
        event,
        keys,
        payloads,
    )
    return len(ids)


async def outbox_counts(pool: Pool) -> list[dict[str, Any]]:
    """Undelivered rows per receiver key and status (for ``/metrics``): ``[{webhook, status, count}]``
    for ``pending`` and ``failed``. Delivered rows, the bulk of the table, are not read: both
    statuses have a partial index. Rows are never deleted, so ``failed`` only grows (a counter)."""
    rows = await pool.fetch(
        """SELECT webhook, status, count(*) AS n FROM webhook_deliveries
           WHERE status IN ('pending', 'failed') GROUP BY webhook, status ORDER BY 1, 2"""
    )
    return [{"webhook": r["webhook"], "status": r["status"], "count": r["n"]} for r in rows]


async def deliveries_of(pool: Pool, alert_id: int) -> list[dict[str, Any]]:
    """An incident's webhook deliveries, oldest first: ``[{time, webhook, event, status, attempts,
    delivered_at, last_error}]`` (the receiver by its key, never its URL or secret)."""
    rows = await pool.fetch(
        "SELECT created_at AS time, webhook, event, status, attempts, delivered_at, last_error "
        "FROM webhook_deliveries WHERE alert_id = $1 ORDER BY seq",
        alert_id,
    )
    return [dict(r) for r in rows]
