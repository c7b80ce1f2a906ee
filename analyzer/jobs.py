"""Training jobs as the scheduler registers them, and the fabric's health under each one.

A job is ``id``, ``hosts`` (server names), optional ``started_at`` and ``expected_days``. Its
health is the fabric under it only: the findings whose blast radius touches its hosts, the
training-efficiency loss they cause (the worst rail sets the pace), and the probability that
the network interrupts it in its remaining days (FABRIC.md's ``1 - a^N`` with the measured
per-GPU network availability).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from analyzer.engine import status_of
from analyzer.findings import Finding
from analyzer.objectives import job_interruption
from fabric.errors import FabricmonError
from fabric.model import Fabric
from store.db import Connection


class JobError(FabricmonError, ValueError):
    """A job description that cannot be used."""


@dataclass(frozen=True, slots=True)
class Job:
    """A training job: where it runs and for how long."""

    id: str
    hosts: tuple[str, ...]
    started_at: datetime | None = None
    expected_days: float | None = None

    def remaining_days(self, now: datetime) -> float:
        """Days left (the whole expected duration when the start is unknown)."""
        if self.expected_days is None:
            return 30.0
        if self.started_at is None:
            return self.expected_days
        return max(0.0, self.expected_days - (now - self.started_at).total_seconds() / 86400)


def job_from_dict(data: Any, where: str = "job") -> Job:
    """Validate a job mapping (from a file or the API)."""
    if not isinstance(data, dict):
        raise JobError(f"{where}: expected a mapping with 'hosts'")
    unknown = set(data) - {"id", "hosts", "started_at", "expected_days"}
    if unknown:
        raise JobError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    hosts = data.get("hosts")
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
        raise JobError(f"{where}: 'hosts' must be a non-empty list of server names")
    started = data.get("started_at")
    if started is not None and not isinstance(started, datetime):
        try:
            started = datetime.fromisoformat(str(started))
        except ValueError:
            raise JobError(f"{where}: 'started_at' is not an ISO 8601 time: {started!r}") from None
    if started is not None and started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    days = data.get("expected_days")
    if days is not None and (isinstance(days, bool) or not isinstance(days, int | float) or days <= 0):
        raise JobError(f"{where}: 'expected_days' must be a number > 0")
    return Job(
        str(data.get("id") or "preflight"), tuple(dict.fromkeys(hosts)), started, None if days is None else float(days)
    )


def load_job_file(path: Path) -> Job:
    """A job from a YAML or JSON file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JobError(f"{path}: cannot read job file: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobError(f"{path}: not YAML/JSON: {str(exc).splitlines()[0]}") from None
    return job_from_dict(data, str(path))


async def load_jobs(conn: Connection) -> list[Job]:
    """Every registered job."""
    rows = await conn.fetch("SELECT id, hosts, started_at, expected_days FROM jobs ORDER BY id")
    return [Job(r["id"], tuple(r["hosts"]), r["started_at"], r["expected_days"]) for r in rows]


def job_health(
    job: Job, fabric: Fabric, findings: list[Finding], gpu_availability: float, now: datetime
) -> dict[str, Any]:
    """The fabric under ``job`` only."""
    hosts = set(job.hosts)
    unknown = sorted(h for h in hosts if h not in fabric.servers)
    touching = [f for f in findings if hosts.intersection(f.scope.servers)]
    gpus = sum(fabric.servers[h].gpus for h in hosts if h in fabric.servers)
    loss = max((float(f.details.get("efficiency_loss", 0.0)) for f in touching), default=0.0)
    rails = sorted({r for f in touching for r in f.scope.rails})
    return {
        "id": job.id,
        "status": status_of(touching),
        "hosts": len(hosts),
        "gpus": gpus,
        "unknown_hosts": unknown,
        "faults": [
            {
                "rule": f.rule,
                "severity": f.severity,
                "summary": f.summary,
                "fingerprint": f.fingerprint,
                "affected_hosts": sorted(hosts.intersection(f.scope.servers)),
                "rails": list(f.scope.rails),
            }
            for f in touching
        ],
        "rails_affected": rails,
        "efficiency_loss": round(loss, 4),
        "remaining_days": round(job.remaining_days(now), 3),
        "interruption_probability": round(job_interruption(gpu_availability, gpus, job.remaining_days(now)), 6),
    }
