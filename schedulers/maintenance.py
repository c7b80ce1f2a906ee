"""Slurm reservations with the ``MAINT`` flag become maintenance windows (SPEC §10.4;
``schedulers.slurm.maintenance_windows``).

Every ``poll_s`` the reservations (``scontrol -o show reservation``, or slurmrestd's
``/reservations``) are read; each one flagged ``MAINT`` is a window ``slurm:<name>`` for its nodes
mapped to fabric servers (``node_map``; nodes that are not fabric servers are left out, and a
reservation with none is no window), from its start to its end. Windows of reservations that are
gone are ended (or removed, if they had not started: :func:`analyzer.maintenance.replace_slurm`).
Windows opened through the API are never touched.

When Slurm cannot be asked, the last known windows are kept: a controller outage is not the end
of every maintenance.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from analyzer.maintenance import SLURM_PREFIX, Window, replace_slurm
from schedulers.config import SlurmConfig
from schedulers.node_map import NodeMap, node_map
from schedulers.polling import PollWords, poll_forever
from schedulers.slurm import SlurmClient, SlurmCommands, SlurmError, SlurmReservation
from store.db import UNAVAILABLE_ERRORS, Pool, PostgresError

log = logging.getLogger(__name__)
_ERRORS: tuple[type[BaseException], ...] = (SlurmError, PostgresError, *UNAVAILABLE_ERRORS)
_WORDS = PollWords(
    again="Slurm MAINT reservations read again: %d window(s)",
    changed="Slurm MAINT reservations: %d in force or ahead, %d ended",
    failed="Slurm reservations unreadable, keeping the last known windows: %s",
    bug="Slurm reservations: unexpected failure",
)


@dataclass(slots=True)
class MaintenanceStats:
    """What the reservation poller saw."""

    polls: int = 0
    failures: int = 0
    windows: int = 0
    last_success: datetime | None = None
    last_error: str | None = None


def to_windows(reservations: Sequence[SlurmReservation], mapping: NodeMap, servers: Collection[str]) -> list[Window]:
    """Maintenance windows for the ``MAINT`` reservations on fabric servers (pure)."""
    out: list[Window] = []
    for r in reservations:
        if not r.maintenance or not r.end > r.start:
            continue
        hosts = tuple(dict.fromkeys(h for n in r.nodes if (h := mapping.server(n)) is not None and h in servers))
        if not hosts:
            continue
        flags = ",".join(sorted(r.flags))
        out.append(
            Window(
                id=None,
                switches=(),
                servers=hosts,
                rails=(),
                start=r.start,
                end=r.end,
                reason=f"Slurm reservation {r.name} ({flags})",
                source=f"{SLURM_PREFIX}{r.name}",
            )
        )
    return out


class SlurmMaintenance:
    """Polls Slurm's reservations and keeps the ``slurm:`` windows equal to its MAINT ones."""

    def __init__(
        self, pool: Pool, config: SlurmConfig, servers: Collection[str], client: SlurmClient | None = None
    ) -> None:
        self.pool = pool
        self.config = config
        self.servers = frozenset(servers)
        self.slurm: SlurmClient = client or SlurmCommands(config)
        self.map = node_map(config.node_map)
        self.stats = MaintenanceStats()

    async def poll_once(self, now: datetime) -> tuple[int, int]:
        """One poll: (windows stored, windows ended or removed). Raises what Slurm or the database raised."""
        windows = to_windows(await self.slurm.reservations(), self.map, self.servers)
        stored, gone = await replace_slurm(self.pool, windows, now)
        self.stats.polls += 1
        self.stats.windows, self.stats.last_success = stored, now
        return stored, gone

    async def run(self) -> None:
        """Poll every ``poll_s`` until cancelled; failures keep the last known windows."""
        await poll_forever(self.poll_once, self.config.poll_s, self.stats, _WORDS, _ERRORS, log)


__all__ = ["MaintenanceStats", "SlurmMaintenance", "to_windows"]
