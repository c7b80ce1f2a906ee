"""The schedulers a running analyzer drives: what each incident transition stores for them
(:class:`~store.scheduler_actions.Policy`), and the tasks that execute actions, discover jobs and read
MAINT reservations as maintenance windows."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from fabric.tasks import owned_tasks
from schedulers.config import SchedulersConfig
from schedulers.discovery import SlurmDiscovery
from schedulers.executor import SCHEDULER, SlurmExecutor
from schedulers.maintenance import SlurmMaintenance
from schedulers.slurm_rest import client_for
from store.db import Pool
from store.scheduler_actions import Policy

log = logging.getLogger(__name__)


class Schedulers:
    """Slurm's executor, job discovery and maintenance windows, when ``schedulers.slurm`` is configured."""

    def __init__(self, config: SchedulersConfig, servers: Collection[str], pool: Pool) -> None:
        self.config = config
        slurm = config.slurm
        self.policies: tuple[Policy, ...] = ()
        self.executor: SlurmExecutor | None = None
        self.discovery: SlurmDiscovery | None = None
        self.maintenance: SlurmMaintenance | None = None
        if slurm is None:
            return
        self.policies = (Policy(SCHEDULER, drain=slurm.drain, checkpoint=slurm.checkpoint_signal is not None),)
        client = client_for(slurm)  # one client, Slurm's commands or slurmrestd, for both
        self.executor = SlurmExecutor(pool, slurm, client=client)
        if slurm.discover_jobs:
            self.discovery = SlurmDiscovery(pool, slurm, servers, client=client)
        if slurm.maintenance_windows:
            self.maintenance = SlurmMaintenance(pool, slurm, servers, client=client)
        if slurm.dry_run:
            log.warning("Slurm actions in dry run: fabricmon records what it would do and changes nothing in Slurm")

    def notify(self) -> None:
        """Actions were stored: execute them now."""
        if self.executor is not None:
            self.executor.notify()

    async def close(self) -> None:
        """A clean stop: the action in flight is run and recorded before the tasks are cancelled."""
        if self.executor is not None:
            await self.executor.close()

    async def run(self) -> None:
        """Execute and discover until cancelled (returns at once with nothing configured)."""
        if self.executor is None:
            return
        async with owned_tasks("Slurm", log) as tasks:
            tasks.start(self.executor.run(), "slurm-actions")
            if self.discovery is not None:
                tasks.start(self.discovery.run(), "slurm-discovery")
            if self.maintenance is not None:
                tasks.start(self.maintenance.run(), "slurm-maintenance")
            await asyncio.wait(tasks.tasks)  # they run until cancelled; one that fails ends them all


__all__ = ["Schedulers"]
