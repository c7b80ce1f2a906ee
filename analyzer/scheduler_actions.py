"""What an incident transition asks of the schedulers, stored with the transition.

:func:`enqueue` runs inside the transaction that opens, escalates or resolves an incident
(:func:`analyzer.alerts.sync_alerts`); the rows and their SQL belong to
:mod:`store.scheduler_actions`, and an executor (:mod:`schedulers.executor`) runs them:

* an incident that fires or escalates with action ``drain`` stores a ``drain`` of its action hosts;
* one whose drain the circuit breaker withheld (``needs_review``) stores a ``withheld`` row
  naming the hosts it would have drained: never executed, always audited (a ``checkpoint`` row
  when the fleet's checkpoint breaker held it, :mod:`analyzer.budget`);
* ``checkpoint``, when ``checkpoint_signal`` is set, stores a ``checkpoint`` of its hosts' jobs;
* once an incident has stayed resolved for ``alerts.resume_after_s`` without re-opening
  (:func:`store.scheduler_actions.release_resumes`), a ``resume`` of every host its drains named.

An escalation stores only what is new: the hosts earlier rows of this incident did not name.
"""

from __future__ import annotations

from collections.abc import Sequence

from analyzer.budget import CHECKPOINT_BREAKER
from analyzer.payloads import AlertRow
from store.db import Connection
from store.scheduler_actions import REASON_PREFIX, ActionKind, Policy, hosts_of, insert

MAX_REASON_CHARS = 200
_DECIDED = ("pending", "done", "dry_run")


def slurm_reason(alert: AlertRow) -> str:
    """The reason a drained node shows: ``fabricmon: <incident id> <summary>`` (one line, bounded)."""
    summary = " ".join(alert.summary.split())
    text = f"{REASON_PREFIX} {alert.id} {summary}"
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


async def enqueue(conn: Connection, alert: AlertRow, event: str, policies: Sequence[Policy]) -> int:
    """Store the actions of one incident transition, per scheduler (call inside its transaction);
    how many rows were stored."""
    n = 0
    for p in policies:
        if event == "alert.resolved":
            continue  # its resume waits until it has stayed resolved: release_resumes
        if not alert.action_hosts:
            continue
        if alert.needs_review:
            held: ActionKind = "checkpoint" if (alert.reason or "").startswith(CHECKPOINT_BREAKER) else "drain"
            if not (p.drain if held == "drain" else p.checkpoint):
                continue
            new = set(alert.action_hosts) - await hosts_of(conn, alert.id, p.scheduler, held, ("withheld",))
            if new:
                why = alert.reason or f"the circuit breaker withheld the {held}"
                await insert(conn, alert.id, p.scheduler, held, alert.action_hosts, why, "withheld")
                n += 1
        elif alert.recommended_action in ("drain", "checkpoint") and (
            p.drain if alert.recommended_action == "drain" else p.checkpoint
        ):
            action: ActionKind = "drain" if alert.recommended_action == "drain" else "checkpoint"
            new = set(alert.action_hosts) - await hosts_of(conn, alert.id, p.scheduler, action, _DECIDED)
            if new:
                await insert(conn, alert.id, p.scheduler, action, sorted(new), slurm_reason(alert), "pending")
                n += 1
    return n


__all__ = ["MAX_REASON_CHARS", "enqueue", "slurm_reason"]
