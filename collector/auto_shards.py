"""``collector.shard: auto``: collectors share the fabric's shards through leases in the database
they already write to (:mod:`store.shard_leases`), with no locker service.

Every tick (``lease_ttl_s / 5``, at most a second) a collector renews its membership and its
leases and reads everyone's. A shard whose lease is free or has expired (its holder died, froze
or lost the database for a TTL) is an orphan; :func:`collector.shard_assign.orphans_for` gives
each orphan to the live member holding the fewest shards, so a standby takes over first and, with
no standby left, the survivors carry the orphans. Claiming bumps the lease's epoch. For each
shard it holds, the collector runs a :class:`~collector.runner.CollectorService` of that shard
(its own pipeline, spool directory and heartbeat) whose every write checks the lease in its
transaction (:class:`~store.shard_leases.Fence`): a collector whose lease was taken over cannot
write a row after the takeover, and stops that shard as soon as a tick shows the loss.

Two rules keep a takeover from being a mistake. A collector claims nothing until a tick after
its first (so collectors started together see each other and share the shards), nor in the tick
after one that failed (after a database outage every lease looks expired: holders renew first).
On a clean stop the leases are released at once, so a standby need not wait out the TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from collector.metrics import CollectorMetrics
from collector.runner import CollectorService, plan
from collector.shard_assign import orphans_for, surplus
from collector.workers import merge_metrics
from config.model import Config
from fabric.model import Fabric
from store.db import UNAVAILABLE_ERRORS, Connection, Pool, PostgresError
from store.shard_leases import Fence, TickView, claim, ensure_shards, release, tick

log = logging.getLogger(__name__)

#: The longest time between two ticks, whatever the TTL.
MAX_TICK_S = 1.0


def session_settings(ttl_s: float) -> dict[str, str]:
    """The collector's database sessions under ``shard: auto``: one frozen inside a write's
    transaction (SIGSTOP, a paused VM) holds its lease row ``FOR SHARE`` and would block every
    takeover; PostgreSQL ends such a session after two TTLs, and the takeover goes on."""
    return {"idle_in_transaction_session_timeout": str(int(2 * ttl_s * 1000))}


def member_id(pid: int | None = None, host: str | None = None) -> str:
    """``<hostname>:<pid>``: who holds a lease (one collector process)."""
    return f"{host or socket.gethostname()}:{pid or os.getpid()}"


@dataclass(slots=True)
class LeaseStats:
    """What /metrics says about this collector's leases."""

    claims: int = 0
    #: Leases found taken over by another collector (this one was presumed dead).
    lost: int = 0
    released: int = 0
    failed_ticks: int = 0
    #: Shard services that ended with an error (their lease released for another to take).
    crashed: int = 0
    held: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Running:
    service: CollectorService
    stop: asyncio.Event
    task: asyncio.Task[None]


class AutoShards:
    """One collector process's share of the fabric under ``shard: auto``."""

    def __init__(
        self,
        config: Config,
        fabric: Fabric,
        pool: Pool,
        *,
        holder: str | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        shards = config.collector.shards
        if config.collector.shard != "auto" or shards is None:
            raise ValueError("AutoShards needs collector.shard: auto and collector.shards")
        self.config = config
        self.fabric = fabric
        self.pool = pool
        self.shards = shards
        self.ttl_s = config.collector.lease_ttl_s
        self.tick_s = min(MAX_TICK_S, self.ttl_s / 5)
        self.holder = holder or member_id()
        self.stats = LeaseStats()
        self._say = say or (lambda text: log.info("%s", text))
        self._running: dict[int, _Running] = {}
        #: Shards being handed over (stopping, then released).
        self._giving: dict[int, asyncio.Task[None]] = {}
        self._good_ticks = 0

    @property
    def services(self) -> dict[int, CollectorService]:
        """The shard services running now, by shard."""
        return {s: r.service for s, r in self._running.items()}

    async def run(self, stop: asyncio.Event) -> None:
        """Hold, take over and collect shards until ``stop``; then drain them and release the leases."""
        try:
            while not stop.is_set():
                await self._round()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.tick_s)
        finally:
            await asyncio.gather(*self._giving.values(), return_exceptions=True)
            held = sorted(self._running)
            await asyncio.gather(*(self._stop_shard(s, why=None) for s in held))
            try:
                async with self.pool.acquire() as conn:
                    await release(conn, self.holder, self.shards, held, leave=True)
                self.stats.released += len(held)
            except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
                log.warning("shard leases not released (%s): they expire in %g s", exc, self.ttl_s)

    async def _round(self) -> None:
        await self._reap()
        try:
            async with self.pool.acquire() as conn:
                if self._good_ticks == 0:
                    await ensure_shards(conn, self.shards)
                view = await tick(conn, self.holder, self.shards, self.ttl_s)
                self._good_ticks += 1
                await self._follow(view)
                if self._good_ticks >= 2:
                    await self._claim(conn, view)
        except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
            self.stats.failed_ticks += 1
            if self._good_ticks:
                log.warning("shard leases not renewed (%s); collecting on, writes checked by the database", exc)
            self._good_ticks = 0
        self.stats.held = {s: f.epoch for s, r in self._running.items() if (f := r.service.pipeline.fence) is not None}

    async def _follow(self, view: TickView) -> None:
        """Stop the shards whose lease another collector took over."""
        for shard in sorted(self._running):
            fence = self._running[shard].service.pipeline.fence
            if fence is not None and view.held.get(shard) != fence.epoch:
                self.stats.lost += 1
                holder = next((le.holder for le in view.leases if le.shard == shard), None)
                await self._stop_shard(shard, why=f"its lease is held by {holder or 'nobody'} now")

    async def _claim(self, conn: Connection, view: TickView) -> None:
        """Give back shards beyond the fair share (in the background: a drain takes a moment), then
        claim the orphans this collector is due."""
        holders = {le.shard: str(le.holder) for le in view.leases if le.live}
        for shard in surplus(self.holder, self.shards, holders, view.members):
            if shard in self._running and shard not in self._giving:
                self._giving[shard] = asyncio.create_task(self._give_back(shard), name=f"give-back-{shard}")
        for shard in orphans_for(self.holder, self.shards, holders, view.members):
            epoch = await claim(conn, self.holder, self.shards, shard, self.ttl_s)
            if epoch is None:
                continue  # another collector was first
            self.stats.claims += 1
            self._start_shard(shard, epoch)

    async def _give_back(self, shard: int) -> None:
        """Stop collecting ``shard`` (drained under the lease still held), then release it."""
        try:
            await self._stop_shard(shard, why="handed over: more collectors share the shards now")
            async with self.pool.acquire() as conn:
                await release(conn, self.holder, self.shards, [shard], leave=False)
            self.stats.released += 1
        except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
            log.warning("shard %d/%d not released (%s): it expires in %g s", shard, self.shards, exc, self.ttl_s)
        finally:
            self._giving.pop(shard, None)

    def _start_shard(self, shard: int, epoch: int) -> None:
        fence = Fence(self.shards, shard, self.holder, epoch)
        the_plan = plan(self.config, self.fabric, f"{shard}/{self.shards}")
        service = CollectorService(self.config, self.fabric, self.pool, the_plan, fence=fence)
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop), name=f"shard-{shard}-of-{self.shards}")
        self._running[shard] = _Running(service, stop, task)
        self._say(f"collecting shard {shard}/{self.shards} (epoch {epoch}): {the_plan.switches} switches")

    async def _stop_shard(self, shard: int, why: str | None) -> None:
        running = self._running.pop(shard, None)
        if running is None:
            return
        if why is not None:
            self._say(f"stopped collecting shard {shard}/{self.shards}: {why}")
        running.stop.set()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await running.task

    async def _reap(self) -> None:
        """A shard service that ended on its own: log it and release its lease for another to take."""
        for shard, running in list(self._running.items()):
            if not running.task.done():
                continue
            del self._running[shard]
            exc = None if running.task.cancelled() else running.task.exception()
            self.stats.crashed += 1
            log.error("shard %d/%d stopped on its own (%s); its lease is released", shard, self.shards, exc)
            with contextlib.suppress(*UNAVAILABLE_ERRORS, PostgresError):
                async with self.pool.acquire() as conn:
                    await release(conn, self.holder, self.shards, [shard], leave=False)


class LeaseMetrics(Collector):
    """``fabricmon_collector_*`` metrics of an ``AutoShards`` collector: each held shard's
    pipeline (labelled ``shard``), and the leases."""

    def __init__(self, auto: AutoShards) -> None:
        self.auto = auto

    def collect(self) -> Iterator[Metric]:
        by_shard = {
            str(s): list(CollectorMetrics(svc.pipeline, svc.collectors, svc.heartbeat.stats, tasks=svc.tasks).collect())
            for s, svc in self.auto.services.items()
        }
        yield from merge_metrics(by_shard)
        st = self.auto.stats
        held = GaugeMetricFamily(
            "fabricmon_collector_shard_lease", "shard leases this collector holds (value: the epoch)", labels=["shard"]
        )
        for shard, epoch in sorted(st.held.items()):
            held.add_metric([str(shard)], epoch)
        yield held
        yield GaugeMetricFamily("fabricmon_collector_shards", "shards the fabric is cut into", value=self.auto.shards)
        for name, text, value in (
            ("fabricmon_collector_shard_claims", "shard leases claimed (taken over or first taken)", st.claims),
            ("fabricmon_collector_shard_leases_lost", "shard leases found taken over by another collector", st.lost),
            ("fabricmon_collector_shard_lease_failed_ticks", "lease renewals that failed", st.failed_ticks),
            ("fabricmon_collector_shard_crashes", "shard services that ended with an error", st.crashed),
        ):
            yield CounterMetricFamily(name, text, value=value)
