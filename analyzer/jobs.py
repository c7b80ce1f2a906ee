"""Training jobs as the scheduler registers them, and the fabric's health under each one.

A job is ``id``, ``hosts`` (server names), optional ``started_at`` and ``expected_days``; what a
valid job is belongs to :mod:`analyzer.job_spec`, the ``jobs`` table to :mod:`store.jobs` (their names are
re-exported here for older imports).

Its health is the fabric under it only: the findings whose blast radius touches its hosts, the
training-efficiency loss they cause (the worst rail sets the pace), and the probability that
the network interrupts it in its remaining days (FABRIC.md's ``1 - a^N`` with the measured
per-GPU network availability).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from analyzer.job_spec import JobError, job_from_dict, load_job_file
from analyzer.objectives import job_interruption
from analyzer.verdict import OpenIncident
from analyzer.verdict import status_of as incident_status
from fabric.model import Fabric
from store.jobs import Job, load_jobs

__all__ = ["Job", "JobError", "job_from_dict", "job_health", "load_job_file", "load_jobs"]


def job_health(
    job: Job, fabric: Fabric, incidents: Sequence[OpenIncident], gpu_availability: float, now: datetime
) -> dict[str, Any]:
    """The fabric under ``job`` only: the open incidents touching its hosts (analyzer.verdict).

    Its status is the worst of them; its efficiency loss the largest any of them causes; its
    interruption probability the model's for its remaining days, or 1.0 while an incident
    recommends draining one of its hosts (that host has lost its path: the job is being
    interrupted now).
    """
    hosts = set(job.hosts)
    unknown = sorted(h for h in hosts if h not in fabric.servers)
    touching = [o for o in incidents if not o.pending and not hosts.isdisjoint(o.servers)]
    gpus = sum(fabric.servers[h].gpus for h in hosts if h in fabric.servers)
    loss = max((o.efficiency_loss for o in touching), default=0.0)
    rails = sorted({r for o in touching for r in o.rails})
    # a host to drain, or one the circuit breaker left to a person, has lost its path: the job is hit
    drained = any((o.action == "drain" or o.needs_review) and not hosts.isdisjoint(o.action_hosts) for o in touching)
    model = job_interruption(gpu_availability, gpus, job.remaining_days(now)) if gpus else 0.0
    return {
        "id": job.id,
        "status": incident_status(touching),
        "hosts": len(hosts),
        "gpus": gpus,
        "unknown_hosts": unknown,
        "faults": [
            {
                "id": o.id,
                "rule": o.rule,
                "severity": o.severity,
                "summary": o.summary,
                "fingerprint": o.fingerprint,
                "recommended_action": o.action,
                "needs_review": o.needs_review,
                "affected_hosts": sorted(hosts.intersection(o.servers)),
                "action_hosts": sorted(hosts.intersection(o.action_hosts)),
                "rails": list(o.rails),
            }
            for o in touching
        ],
        "rails_affected": rails,
        "efficiency_loss": round(loss, 4),
        "remaining_days": round(job.remaining_days(now), 3),
        "interruption_probability": 1.0 if drained else round(model, 6),
    }
