"""Fleet-wide limits across incidents: the drain budget and the checkpoint circuit breaker.

The per-incident circuit breaker (:func:`analyzer.actions.decide`) bounds what one incident may
drain. Several unrelated incidents at once (or one false alarm split in many) can still add up
to a large part of the fleet, so :func:`analyzer.alerts.sync_alerts` keeps two running totals
in the transaction that holds the firing alerts' locks:

* **drain budget**: the hosts held drained by every open incident (its recommended action is
  ``drain``), plus the hosts of resolved incidents whose resume has not run yet (they are still
  out of the fleet, :mod:`store.scheduler_actions`), never exceed ``alerts.drain_budget_hosts`` nor
  ``alerts.drain_budget_fraction`` of the fabric's servers (the smaller wins, never below one);
* **checkpoint breaker**: the hosts whose jobs every open incident checkpoints never exceed
  ``alerts.max_checkpoint_hosts`` nor ``alerts.max_checkpoint_fraction`` of the servers.

Incidents already holding their hosts are counted first (they are not taken back); then, in a
fixed order, each incident that would add hosts is admitted while the total stays within the
limit. One that would exceed it becomes ``observe`` with ``needs_review``, critical, its
``action_hosts`` the hosts it would have acted on and its ``reason`` saying which limit held it
back, exactly as the per-incident breaker does. Review is sticky while the incident is open
(:func:`analyzer.actions.merge_decision`): a budget that frees up later never turns the held-back
decision into a drain. Only a new incident, decided from the evidence of its own evaluation,
acts again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from store.db import Connection

#: How a reason given by the checkpoint breaker starts (its withheld audit row is a checkpoint).
CHECKPOINT_BREAKER = "fabric-wide checkpoint circuit breaker"
#: The actions a fleet limit applies to, with the config keys named in a held-back reason.
_KEYS = {"drain": "alerts.drain_budget_hosts/_fraction", "checkpoint": "alerts.max_checkpoint_hosts/_fraction"}


@dataclass(frozen=True, slots=True)
class FleetLimits:
    """The two fleet-wide limits for one fabric, in hosts (:meth:`analyzer.actions.ActionPolicy.drain_budget`)."""

    drain: int
    checkpoint: int


@dataclass(slots=True)
class FleetUse:
    """The hosts held so far this round, per action."""

    limits: FleetLimits
    held: dict[str, set[str]] = field(default_factory=lambda: {"drain": set(), "checkpoint": set()})

    def hold(self, action: str, hosts: Iterable[str]) -> None:
        """Count ``hosts`` as held by ``action`` (an incident already acting on them)."""
        if action in self.held:
            self.held[action] |= set(hosts)

    def admit(self, action: str, hosts: Iterable[str]) -> str | None:
        """Count ``hosts`` under ``action`` if the limit allows; else the reason it does not (and
        nothing is counted). Actions without a fleet limit (observe) are always admitted."""
        if action not in self.held:
            return None
        wanted = set(hosts)
        total = self.held[action] | wanted
        limit = self.limits.drain if action == "drain" else self.limits.checkpoint
        if len(total) <= limit:
            self.held[action] = total
            return None
        new = len(wanted - self.held[action])
        what = "drain budget" if action == "drain" else "checkpoint circuit breaker"
        verb = "drained" if action == "drain" else "checkpointed"
        return (
            f"fabric-wide {what}: {action} of {new} more hosts would leave {len(total)} hosts {verb} by open "
            f"incidents, more than {limit} ({_KEYS[action]}); a person decides"
        )


async def awaiting_resume(conn: Connection) -> set[str]:
    """Hosts drained for resolved incidents whose resume has not run yet (pending or not released:
    :func:`store.scheduler_actions.release_resumes`); they still count against the drain budget."""
    hosts = await conn.fetchval(
        """SELECT coalesce(array_agg(DISTINCT h), '{}') FROM scheduler_actions d
                  JOIN alerts a ON a.id = d.alert_id, unnest(d.hosts) AS h
           WHERE d.action = 'drain' AND d.status IN ('pending', 'done') AND a.state = 'resolved'
             AND NOT EXISTS (SELECT 1 FROM scheduler_actions r
                             WHERE r.alert_id = d.alert_id AND r.scheduler = d.scheduler AND r.action = 'resume'
                               AND r.status IN ('done', 'failed', 'dry_run'))"""
    )
    return set(hosts)


__all__ = ["CHECKPOINT_BREAKER", "FleetLimits", "FleetUse", "awaiting_resume"]
