"""Stored alerts as people read them: the list, one alert, its timeline, and the acknowledgement.

The lifecycle that writes them is :mod:`analyzer.alerts`; the API (``/v1/alerts``,
``/v1/incidents``) reads through these.
"""

from __future__ import annotations

from typing import Any, Literal

from analyzer.payloads import AlertRow
from fabric.errors import FabricmonError
from store.db import Pool

AlertState = Literal["firing", "resolved", "all"]
MAX_LIST_LIMIT = 1000


class AlertInputError(FabricmonError, ValueError):
    """A bad argument: naive time, negative hold-down, unknown state, limit out of range."""


async def incident_timeline(pool: Pool, alert_id: int) -> list[dict[str, Any]]:
    """An incident's timeline, oldest first: ``[{time, event, severity, action, rule, summary, symptoms}]``."""
    rows = await pool.fetch(
        "SELECT time, event, severity, action, rule, summary, symptoms FROM incident_events "
        "WHERE alert_id = $1 ORDER BY time, id",
        alert_id,
    )
    return [{**dict(r), "time": r["time"]} for r in rows]


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
