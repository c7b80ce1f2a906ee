"""Slurm's running jobs become fabricmon jobs (``schedulers.slurm.discover_jobs``).

Every ``poll_s`` the running jobs (``squeue --json``) are stored as jobs ``slurm:<jobid>``: hosts
are the expanded node list mapped to fabric servers (``node_map``; nodes that are not fabric
servers, such as CPU or login nodes, are left out, and a job with none is not a fabric job),
``started_at`` the job's start and ``expected_days`` its time limit (none when unlimited).
Finished jobs leave. Jobs registered by hand (other ids) are never touched.

When Slurm cannot be asked (slurmctld away: ``squeue`` then answers an empty list *with an
error*), the last known jobs are kept: a controller outage is not every job finishing.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from schedulers.config import SlurmConfig
from schedulers.node_map import NodeMap, node_map
from schedulers.polling import PollWords, poll_forever
from schedulers.slurm import SlurmClient, SlurmCommands, SlurmError, SlurmJob
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError
from store.jobs import Job, replace_discovered

log = logging.getLogger(__name__)
PREFIX = "slurm:"
_ERRORS: tuple[type[BaseException], ...] = (SlurmError, PostgresError, *UNAVAILABLE_ERRORS)
_WORDS = PollWords(
    again="Slurm job discovery works again: %d running job(s)",
    changed="Slurm job discovery: %d job(s) running, %d finished",
    failed="Slurm job discovery failed, keeping the last known jobs: %s",
    bug="Slurm job discovery: unexpected failure",
)


@dataclass(slots=True)
class DiscoveryStats:
    """What discovery saw (for ``/metrics``)."""

    polls: int = 0
    failures: int = 0
    jobs: int = 0
    skipped_jobs: int = 0  # running, but on no fabric server
    last_success: datetime | None = None
    last_error: str | None = None


def to_jobs(running: list[SlurmJob], mapping: NodeMap, servers: Collection[str]) -> tuple[list[Job], int]:
    """fabricmon jobs for Slurm's running jobs (pure); and how many ran on no fabric server."""
    out: list[Job] = []
    skipped = 0
    for j in running:
        hosts = [h for n in j.nodes if (h := mapping.server(n)) is not None and h in servers]
        if not hosts:
            skipped += 1
            continue
        days = None if j.time_limit_min is None or j.time_limit_min <= 0 else min(j.time_limit_min / 1440, 3650.0)
        out.append(Job(f"{PREFIX}{j.job_id}", tuple(dict.fromkeys(hosts)), j.started_at, days))
    return out, skipped


class SlurmDiscovery:
    """Polls ``squeue`` and keeps the ``slurm:`` jobs equal to what runs."""

    def __init__(
        self, pool: Pool, config: SlurmConfig, servers: Collection[str], client: SlurmClient | None = None
    ) -> None:
        self.pool = pool
        self.config = config
        self.servers = frozenset(servers)
        self.slurm: SlurmClient = client or SlurmCommands(config)
        self.map = node_map(config.node_map)
        self.stats = DiscoveryStats()

    async def poll_once(self, now: datetime) -> tuple[int, int]:
        """One poll: (jobs stored, jobs removed). Raises what Slurm or the database raised."""
        running = await self.slurm.jobs(max_nodes=max(1, len(self.servers)) * 4 + 1024)
        jobs, skipped = to_jobs(running, self.map, self.servers)
        stored, removed = await replace_discovered(self.pool, PREFIX, jobs)
        self.stats.polls += 1
        self.stats.jobs, self.stats.skipped_jobs, self.stats.last_success = stored, skipped, now
        return stored, removed

    async def run(self) -> None:
        """Poll every ``poll_s`` until cancelled; failures keep the last known jobs."""
        await poll_forever(self.poll_once, self.config.poll_s, self.stats, _WORDS, _ERRORS, log)


__all__ = ["PREFIX", "DiscoveryStats", "SlurmDiscovery", "to_jobs"]
