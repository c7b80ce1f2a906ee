"""``fabricmon collect``: every configured target's collector, feeding one pipeline.

Protocols are chosen from an explicit table (``COLLECTORS``); each collector owns its
per-target tasks. The service owns the collectors, the pipeline and the retention schedule,
and on stop cancels the collectors first, then drains the pipeline (to the database, or to the
spool), so nothing read is lost on SIGTERM. Its heartbeat (:mod:`collector.heartbeat`) tells the
database, every few seconds, which switches it collects and what it has committed; a clean stop
says so last.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from collector.clock import ClockGuard
from collector.config import CollectorConfig
from collector.gnmi import GnmiCollector
from collector.heartbeat import HeartbeatTask, sampling_interval
from collector.pipeline import Pipeline
from collector.records import Sink
from collector.snmp import SnmpCollector
from collector.targets import SwitchTarget, in_shard, parse_shard, resolve_targets
from config.errors import ConfigError
from config.model import Config
from fabric.model import Fabric
from fabric.supervise import TaskHealth
from fabric.tasks import owned_tasks
from store.db import Pool
from store.pgserver import default_root
from store.retention import retention_loop
from store.shard_leases import Fence

log = logging.getLogger(__name__)


class ProtocolCollector(Protocol):
    """What every protocol collector offers the service."""

    stats: Any

    async def run(self) -> None: ...


class CollectorFactory(Protocol):
    def __call__(self, targets: Sequence[SwitchTarget], sink: Sink, config: CollectorConfig) -> ProtocolCollector: ...


COLLECTORS: dict[str, CollectorFactory] = {"gnmi": GnmiCollector, "snmp": SnmpCollector}


def default_spool_dir(shard: tuple[int, int] | None) -> Path:
    """Beside the embedded store's data; one directory per shard, so shards never share files."""
    return spool_dir_for(default_root().parent / "spool", shard)


def spool_dir_for(base: Path, shard: tuple[int, int] | None) -> Path:
    """A shard's own spool under ``base`` (``shard-I-of-N``): two shard processes given the same
    configured ``spool_dir`` must not write and replay each other's files."""
    return base / f"shard-{shard[0]}-of-{shard[1]}" if shard else base


@dataclass(frozen=True, slots=True)
class Plan:
    """Which switches this process collects, over which protocol."""

    targets: dict[str, list[SwitchTarget]]
    unmatched: list[str]
    shard: tuple[int, int] | None

    @property
    def switches(self) -> int:
        return sum(len(t) for t in self.targets.values())


def plan(config: Config, fabric: Fabric, shard: str | None = None) -> Plan:
    """Resolve and shard the targets."""
    targets, unmatched = resolve_targets(config.targets, fabric)
    shard_text = shard or config.collector.shard
    if shard_text == "auto":
        raise ConfigError(
            "collector.shard: auto is for `fabricmon collect`, whose collectors claim shard leases; "
            "here, collect the whole fabric or a static 'I/N' shard"
        )
    parsed = parse_shard(shard_text) if shard_text else None
    if parsed is not None:
        targets = in_shard(targets, *parsed)
    by_protocol: dict[str, list[SwitchTarget]] = {}
    for t in targets:
        by_protocol.setdefault(t.protocol, []).append(t)
    return Plan(by_protocol, unmatched, parsed)


class CollectorService:
    """The collectors of one process and the pipeline they share."""

    def __init__(
        self, config: Config, fabric: Fabric, pool: Pool, the_plan: Plan, *, fence: Fence | None = None
    ) -> None:
        """``fence``: the shard lease every write must still hold (``shard: auto``)."""
        self.config = config
        self.plan = the_plan
        configured = config.database.writer.spool_dir
        spool_dir = spool_dir_for(configured, the_plan.shard) if configured else default_spool_dir(the_plan.shard)
        #: Bounds the switches' timestamps (the pipeline's put_ports/put_lldp); the heartbeat persists it.
        self.clock = ClockGuard(config.collector.max_clock_skew_s)
        self.pipeline = Pipeline(
            pool,
            fabric,
            config.database.writer,
            spool_dir=spool_dir,
            pfc_heartbeat_s=config.collector.pfc_heartbeat_s,
            clock=self.clock,
            fence=fence,
        )
        self.pool = pool
        self.retention_health = TaskHealth("retention")
        self.collectors: dict[str, ProtocolCollector] = {
            protocol: COLLECTORS[protocol](targets, self.pipeline, config.collector)
            for protocol, targets in the_plan.targets.items()
        }
        self.heartbeat = HeartbeatTask(
            pool,
            self.pipeline,
            switches=lambda: [t.switch for targets in self.plan.targets.values() for t in targets],
            interval_s=sampling_interval(config.collector, the_plan.targets),
            shard=the_plan.shard,
            clock=self.clock,
        )

    def tasks(self) -> list[TaskHealth]:
        """The background tasks /metrics reports: the pipeline's, and retention."""
        return [*self.pipeline.tasks(), self.retention_health]

    async def run(self, stop: asyncio.Event) -> None:
        """Collect until ``stop`` is set or a task fails (its error logged and raised once every
        task stopped: fabric/tasks.py); then drain and return."""
        self.pipeline.start()
        self.heartbeat.start()
        clean = False
        try:
            async with owned_tasks("collector", log) as tasks:
                running = {tasks.start(c.run(), f"collector-{p}") for p, c in self.collectors.items()}
                retention = retention_loop(self.pool, self.config.database.retention, self.retention_health)
                tasks.start(retention, "retention")
                stopper = tasks.start(stop.wait(), "stop")
                while not stop.is_set():
                    done, _ = await asyncio.wait([*running, stopper], return_when=asyncio.FIRST_COMPLETED)
                    for task in done - {stopper}:
                        running.discard(task)
                        if not task.cancelled() and task.exception() is None:
                            log.warning("%s finished on its own", task.get_name())
                clean = True
        finally:
            await self.pipeline.close()
            await self.heartbeat.stop(clean=clean)  # after the drain: the final watermark; a crash goes silent
