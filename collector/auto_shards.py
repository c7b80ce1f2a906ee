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

Rules that keep a takeover from being a mistake:

- A collector claims nothing for ``max(2 ticks, TTL / 3)`` after it starts, and again after a tick
  that failed: collectors started together see each other, and after a database outage (when every
  lease looks expired) the holders, which renew whatever the expiry, get there first.
- Ticks run on connections of their own (``lease_pool``), each bounded by ``TTL / 3``: a busy
  pipeline or a spool replay never delays a renewal.
- A collector renews only the shards it runs (or is still draining); its holder id is unique per
  process, so a restarted container never inherits leases it does not run.
- Lost, handed-over and crashed shards stop in the background while the ticks go on; a clean stop
  drains every shard with its lease still renewed, then releases them all at once.
- A shard whose service crashed is not claimed again by this collector for a TTL (another may take
  it; if none does, this one restarts it then: a restart with backoff).
- Collectors configured with different ``shards`` would build two lease sets over the same
  switches: each stands by and says so.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import secrets
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
from fabric.waits import wait_event
from store.db import UNAVAILABLE_ERRORS, Connection, Pool, PostgresError
from store.shard_leases import Fence, TickView, claim, ensure_shards, release, tick

log = logging.getLogger(__name__)

#: The longest time between two ticks, whatever the TTL.
MAX_TICK_S = 1.0


def session_settings(ttl_s: float) -> dict[str, str]:
    """The lease and write sessions under ``shard: auto``. A writer frozen between its fence check
    and its commit (SIGSTOP, a paused VM) holds its lease row ``FOR SHARE`` and would block the
    takeover: PostgreSQL ends a session idle in a transaction after half a TTL. A dead host or a
    partition: keepalives and ``tcp_user_timeout`` end its sessions within about a TTL."""
    idle = max(1, math.ceil(ttl_s / 2))
    return {
        "idle_in_transaction_session_timeout": str(idle * 1000),
        "tcp_keepalives_idle": str(idle),
        "tcp_keepalives_interval": "1",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": str((idle + 3) * 1000),
    }


def member_id(pid: int | None = None, host: str | None = None) -> str:
    """``<hostname>:<pid>#<random>``: who holds a lease. The random part makes a restarted
    process (a container's PID 1 again, on the same pod name) a new member, never the holder of
    its predecessor's leases."""
    return f"{host or socket.gethostname()}:{pid or os.getpid()}#{secrets.token_hex(4)}"


@dataclass(slots=True)
class LeaseStats:
    """What /metrics says about this collector's leases."""

    claims: int = 0
    #: Leases found taken over by another collector (this one was presumed dead).
    lost: int = 0
    released: int = 0
    failed_ticks: int = 0
    #: Shard services that ended with an error, or could not start (their lease released).
    crashed: int = 0
    held: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Running:
    service: CollectorService
    stop: asyncio.Event
    task: asyncio.Task[None]


class AutoShards:
    """One collector process's share of the fabric under ``shard: auto``.

    ``lease_pool``: the connections for the lease ticks, apart from the writers' (a busy pipeline
    or a spool replay must never delay a renewal); by default ``pool``."""

    def __init__(
        self,
        config: Config,
        fabric: Fabric,
        pool: Pool,
        *,
        lease_pool: Pool | None = None,
        holder: str | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        shards = config.collector.shards
        if config.collector.shard != "auto" or shards is None:
            raise ValueError("AutoShards needs collector.shard: auto and collector.shards")
        self.config = config
        self.fabric = fabric
        self.pool = pool
        self.lease_pool = lease_pool or pool
        self.shards = shards
        self.ttl_s = config.collector.lease_ttl_s
        self.tick_s = min(MAX_TICK_S, self.ttl_s / 5)
        #: A tick that takes longer fails (its connection is given up): well inside the TTL.
        self.tick_timeout_s = max(self.tick_s, self.ttl_s / 3)
        #: Claims wait this long after a start or a failed tick: holders renew first.
        self.claim_after_s = max(2 * self.tick_s, self.ttl_s / 3)
        self.holder = holder or member_id()
        self.stats = LeaseStats()
        self._say = say or (lambda text: log.info("%s", text))
        self._running: dict[int, _Running] = {}
        #: Shards stopping (lost, handed over, crashed), each with its task.
        self._stopping: dict[int, asyncio.Task[None]] = {}
        #: Shards this collector does not claim again before the time given (a crashed service).
        self._cooling: dict[int, float] = {}
        self._claims_from = 0.0
        self._warned_shards: tuple[int, ...] = ()

    @property
    def services(self) -> dict[int, CollectorService]:
        """The shard services running now, by shard."""
        return {s: r.service for s, r in self._running.items()}

    async def run(self, stop: asyncio.Event) -> None:
        """Hold, take over and collect shards until ``stop``; then drain them (renewing their
        leases meanwhile) and release the leases."""
        loop = asyncio.get_running_loop()
        self._claims_from = loop.time() + self.claim_after_s
        try:
            while not stop.is_set():
                await self._round(claim=True)
                await wait_event(stop, self.tick_s)
        finally:
            for shard in list(self._running):
                self._stop_in_background(shard, why=None, release_after=False)
            draining = set(self._stopping.values())
            while draining:  # the leases stay ours while the shards drain under them
                _, draining = await asyncio.wait(draining, timeout=self.tick_s)
                if draining:
                    await self._round(claim=False)
            await self._leave()

    async def _round(self, *, claim: bool) -> None:
        self._reap()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.tick_timeout_s), self.lease_pool.acquire() as conn:
                await ensure_shards(conn, self.shards)
                view = await tick(conn, self.holder, self.shards, self.ttl_s, [*self._running, *self._stopping])
                self._follow(view)
                if view.other_shard_counts:
                    self._warn_mixed(view.other_shard_counts)
                elif claim and loop.time() >= self._claims_from:
                    await self._claim(conn, view)
        except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
            self.stats.failed_ticks += 1
            if loop.time() >= self._claims_from:
                log.warning("shard leases not renewed (%s); collecting on, writes checked by the database", exc)
            self._claims_from = loop.time() + self.claim_after_s
        self.stats.held = {s: f.epoch for s, r in self._running.items() if (f := r.service.pipeline.fence) is not None}

    def _follow(self, view: TickView) -> None:
        """Stop the shards whose lease another collector took over."""
        for shard in sorted(self._running):
            fence = self._running[shard].service.pipeline.fence
            if fence is not None and view.held.get(shard) != fence.epoch:
                self.stats.lost += 1
                holder = next((le.holder for le in view.leases if le.shard == shard), None)
                self._stop_in_background(
                    shard, why=f"its lease is held by {holder or 'nobody'} now", release_after=False
                )

    def _warn_mixed(self, others: tuple[int, ...]) -> None:
        if others != self._warned_shards:
            self._warned_shards = others
            log.error(
                "other shard: auto collectors run with collector.shards = %s, this one with %d: standing by "
                "(two lease sets would collect the same switches twice); give every collector the same shards",
                ", ".join(map(str, others)), self.shards,
            )  # fmt: skip

    async def _claim(self, conn: Connection, view: TickView) -> None:
        """Give back shards beyond the fair share (in the background: a drain takes a moment), then
        claim the orphans this collector is due (not one it is cooling off from)."""
        holders = {le.shard: str(le.holder) for le in view.leases if le.live}
        for shard in surplus(self.holder, self.shards, holders, view.members):
            if shard in self._running:
                self._stop_in_background(
                    shard, why="handed over: more collectors share the shards now", release_after=True
                )
        now = asyncio.get_running_loop().time()
        for shard in orphans_for(self.holder, self.shards, holders, view.members):
            if self._cooling.get(shard, 0.0) > now or shard in self._stopping:
                continue
            epoch = await claim(conn, self.holder, self.shards, shard, self.ttl_s)
            if epoch is None:
                continue  # another collector was first
            self.stats.claims += 1
            try:
                self._start_shard(shard, epoch)
            except Exception as exc:  # its spool directory, say: local to this host
                self._crashed(shard, exc)
                await release(conn, self.holder, self.shards, [shard], leave=False)

    def _start_shard(self, shard: int, epoch: int) -> None:
        fence = Fence(self.shards, shard, self.holder, epoch)
        the_plan = plan(self.config, self.fabric, f"{shard}/{self.shards}")
        service = CollectorService(self.config, self.fabric, self.pool, the_plan, fence=fence)
        stop = asyncio.Event()
        task = asyncio.create_task(service.run(stop), name=f"shard-{shard}-of-{self.shards}")
        self._running[shard] = _Running(service, stop, task)
        self._say(f"collecting shard {shard}/{self.shards} (epoch {epoch}): {the_plan.switches} switches")

    def _stop_in_background(self, shard: int, why: str | None, *, release_after: bool) -> None:
        """Stop collecting ``shard``: its service drains (under the lease, renewed meanwhile),
        then, with ``release_after``, the lease is given back at once."""
        running = self._running.pop(shard, None)
        if running is None:
            return
        if why is not None:
            self._say(f"stopped collecting shard {shard}/{self.shards}: {why}")
        running.stop.set()
        self._stopping[shard] = asyncio.create_task(self._finish(shard, running, release_after), name=f"stop-{shard}")

    async def _finish(self, shard: int, running: _Running, release_after: bool) -> None:
        try:
            await asyncio.wait([running.task])
            if release_after:
                async with asyncio.timeout(self.tick_timeout_s), self.lease_pool.acquire() as conn:
                    await release(conn, self.holder, self.shards, [shard], leave=False)
                self.stats.released += 1
        except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
            log.warning("shard %d/%d not released (%s): it lapses in %g s", shard, self.shards, exc, self.ttl_s)
        finally:
            self._stopping.pop(shard, None)

    def _reap(self) -> None:
        """A shard service that ended on its own (an error): stop it, let its lease go, and do not
        claim it again for a TTL, so another collector can take it (a restart with backoff)."""
        for shard, running in list(self._running.items()):
            if running.task.done():
                exc = None if running.task.cancelled() else running.task.exception()
                self._crashed(shard, exc)
                self._stop_in_background(shard, why=None, release_after=True)

    def _crashed(self, shard: int, exc: BaseException | None) -> None:
        self.stats.crashed += 1
        self._cooling[shard] = asyncio.get_running_loop().time() + self.ttl_s
        log.error("shard %d/%d stopped on its own (%s); its lease is released", shard, self.shards, exc)

    async def _leave(self) -> None:
        """A clean stop: every lease given back at once (a standby need not wait out the TTL)."""
        try:
            async with asyncio.timeout(self.tick_timeout_s), self.lease_pool.acquire() as conn:
                await release(conn, self.holder, self.shards, range(self.shards), leave=True)
            self.stats.released += len(self.stats.held)
        except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
            log.warning("shard leases not released (%s): they lapse in %g s", exc, self.ttl_s)


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
            ("fabricmon_collector_shard_leases_released", "shard leases given back", st.released),
        ):
            yield CounterMetricFamily(name, text, value=value)
