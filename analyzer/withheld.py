"""Incidents a scheduler's own breaker held back since the last round turn to review.

An executor whose fleet breaker (``schedulers.slurm.max_drained_nodes``) withholds a drain records
why in the action's row (:func:`store.scheduler_actions.record` with ``review_reason``) and goes on:
it never calls back into the analyzer. The next round reads those rows
(:func:`store.scheduler_actions.withheld_for_review`) before it syncs the alerts, and turns each
firing incident to review (:func:`analyzer.alerts.require_review`: ``observe``, ``needs_review``,
critical, receivers told). Reading is idempotent: an incident already under review is not read again.
"""

from __future__ import annotations

from collections.abc import Sequence

from analyzer.alerts import SyncResult, require_review
from analyzer.config import AlertsConfig, WebhookConfig
from store.db import Pool
from store.scheduler_actions import Policy, withheld_for_review


async def review_withheld(
    pool: Pool,
    *,
    webhooks: Sequence[WebhookConfig],
    settings: AlertsConfig | None = None,
    schedulers: Sequence[Policy] = (),
    idle_timeout_s: float | None = None,
) -> SyncResult:
    """Turn to review every firing incident an executor's breaker withheld an action of; what changed."""
    escalated = deliveries = actions = 0
    for alert_id, why in await withheld_for_review(pool):
        r = await require_review(
            pool,
            alert_id,
            why,
            webhooks=webhooks,
            settings=settings,
            schedulers=schedulers,
            idle_timeout_s=idle_timeout_s,
        )
        escalated, deliveries, actions = escalated + r.escalated, deliveries + r.deliveries, actions + r.actions
    return SyncResult(escalated=escalated, deliveries=deliveries, actions=actions)


__all__ = ["review_withheld"]
