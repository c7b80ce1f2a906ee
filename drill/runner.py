"""Running a drill: the collectors, the analyzer and a webhook receiver in one process (as
``fabricmon demo`` runs them), the simulated switches in a process of their own
(:mod:`simulator.process`, faults over its control API), then a seeded campaign (:mod:`drill.campaign`),
up to K events at once at unrelated places, scored (:mod:`drill.score`) against what the
receiver got.

One event's life: applied; for a fault, held until an incident touching its places fires (or
the event's time limit), then two intervals more, so that escalations land; cleared; then held
until what fired about it resolved (or the limit), and two quiet intervals. A benign event is
held for its own time, then watched for the same quiet window. Its footprint is released only
then, so two events never overlap at related places.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from analyzer.maintenance import Window, add_window
from analyzer.service import AnalyzerService
from cli.service import database
from collector.runner import CollectorService, plan
from config.model import Config
from demo.receiver import Receiver
from demo.runner import DemoError, DemoOptions, demo_config
from drill.campaign import EVERYWHERE, Planned, footprints_meet, miswire_roots, plan_campaign
from drill.goals import DEFAULT_GOALS, Goal, judge
from drill.score import Injected, Score, Seen, names_place, score, seen_from
from fabric.model import Fabric, FabricParams
from fabric.tasks import stop_task
from simulator.nos import MIXED
from simulator.process import RemoteSim, sim_process
from simulator.runner import SimOptions
from store.jobs import Job, save_job

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class DrillOptions:
    """What ``fabricmon drill`` was asked for."""

    gpus: int = 1024
    inventory: Path | None = None
    faults: int = 20
    benign: int = 10
    concurrency: int = 4
    seed: int = 1
    interval_s: float = 2.0
    naming: str = "mixed"
    #: Only these fault and benign kinds (empty: every kind), to replay one class.
    kinds: tuple[str, ...] = ()
    #: How long one event may take to be reported, and then to resolve (0: 12 intervals, >= 24 s:
    #: the longest confirmation wait, a server link down 7 s, plus a sample and an evaluation, twice).
    event_timeout_s: float = 0.0
    #: Figure → bound (:mod:`drill.goals`).
    goals: tuple[tuple[str, float], ...] = tuple(DEFAULT_GOALS.items())

    @property
    def timeout_s(self) -> float:
        return self.event_timeout_s or max(24.0, 12 * self.interval_s)


@dataclass(slots=True)
class DrillResult:
    """A drill's truth, what fabricmon sent, and the score."""

    options: DrillOptions
    gpus: int
    switches: int
    score: Score
    events: list[Injected] = field(default_factory=list)
    #: Every incident the receiver was sent, as the scorer saw it.
    incidents: list[Seen] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def goals(self) -> list[Goal]:
        return judge(self.score, self.options.interval_s, dict(self.options.goals))

    @property
    def ok(self) -> bool:
        return all(g.ok for g in self.goals)


class _Collector:
    """The collector service, restartable (a benign event)."""

    def __init__(self, config: Config, fabric: Fabric, pool: Any) -> None:
        self.config, self.fabric, self.pool = config, fabric, pool
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.stop = asyncio.Event()
        service = CollectorService(self.config, self.fabric, self.pool, plan(self.config, self.fabric))
        self.task = asyncio.create_task(service.run(self.stop))

    async def close(self) -> None:
        self.stop.set()
        await stop_task(self.task, "the drill's collector", grace_s=30)

    async def restart(self) -> None:
        await self.close()
        self.start()


async def run_drill(opts: DrillOptions, dsn: str, say: Say) -> DrillResult:
    """Run the whole drill; return its truth and score."""
    secret = secrets.token_hex(16)
    receiver = Receiver(secret)
    webhook = await receiver.start()
    run_dir = Path(tempfile.mkdtemp(prefix="fabricmon-drill-"))  # the simulator's TLS files, our spool
    params = None if opts.inventory is not None else FabricParams(gpus=opts.gpus)
    say(f"simulating {'the inventory ' + str(opts.inventory) if opts.inventory else f'a {opts.gpus}-GPU AIPod'}"
        f" ({opts.naming} port names), every NOS shape")  # fmt: skip
    loopback = "127.0.0.1:0"
    sim_opts = SimOptions(params=params, inventory=opts.inventory, gnmi=loopback, snmp=loopback, control=loopback,
                          seed=opts.seed, nos=MIXED, naming=opts.naming, tls_dir=run_dir / "tls")  # fmt: skip
    try:
        async with sim_process(sim_opts) as sim:
            return await _drill_against(opts, sim, receiver, webhook, secret, dsn, say, run_dir / "spool")
    finally:
        await receiver.stop()
        shutil.rmtree(run_dir, ignore_errors=True)


async def _drill_against(opts: DrillOptions, sim: RemoteSim, receiver: Receiver, webhook: str, secret: str,
                         dsn: str, say: Say, spool_dir: Path) -> DrillResult:  # fmt: skip
    """The drill on a running simulator; its writers spool into ``spool_dir``, the run's own (a
    scratch database must never receive rows an earlier, interrupted drill spooled)."""
    fabric = sim.fabric
    demo = DemoOptions(gpus=fabric.gpus, interval_s=opts.interval_s, naming=opts.naming, listen="127.0.0.1:0")
    config = demo_config(sim.endpoints, demo, webhook, secret, dsn, spool_dir)
    snmp = [t for targets in config.targets if targets.protocol == "snmp" for t in targets.switches or ()]
    campaign = plan_campaign(fabric, faults=opts.faults, benign=opts.benign, seed=opts.seed,
                             snmp_switches=[s for s in snmp if s in fabric.switches], kinds=opts.kinds)  # fmt: skip
    async with database(dsn, config, fabric) as pool:
        await _jobs(pool, fabric)
        collector = _Collector(config, fabric, pool)
        started = datetime.now(UTC)
        analyzer = AnalyzerService(config, fabric, pool)
        stop = asyncio.Event()
        collector.start()
        analyzing = asyncio.create_task(analyzer.run(stop))
        try:
            await _ready(analyzer, pool, fabric, started, max(90.0, 8 * opts.interval_s))
            say(f"healthy; {len(campaign)} events ({opts.faults} faults, {opts.benign} benign), "
                f"up to {opts.concurrency} at once, seed {opts.seed}")  # fmt: skip
            t0 = time.monotonic()
            drill = _Drill(opts, sim, receiver, collector, t0, say)
            events = await drill.run(campaign)
            elapsed = time.monotonic() - t0
        finally:
            stop.set()
            await stop_task(analyzing, "the drill's analyzer", grace_s=30)
            await collector.close()
    seen = seen_from((d.at - t0, d.event, d.body) for d in receiver.deliveries)
    result = score(events, seen, grace_s=3 * opts.interval_s)
    return DrillResult(opts, fabric.gpus, len(fabric.switches), result, events, seen, elapsed)


async def _cut_sessions(pool: Any) -> None:
    """A database blip: every other session to the drill's database ended at once, as a failover or
    a server restart ends them (the writers, the analyzer's leader lock and its rounds reconnect)."""
    async with pool.acquire() as conn:
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


async def _jobs(pool: Any, fabric: Fabric) -> None:
    """One training job per group of servers (a full cluster), so storms have jobs to checkpoint."""
    by_group: dict[int, list[str]] = {}
    for name, server in sorted(fabric.servers.items()):
        by_group.setdefault(server.group, []).append(name)
    for group, hosts in sorted(by_group.items()):
        await save_job(pool, Job(f"llm-g{group}", tuple(hosts), datetime.now(UTC), 14.0))


async def _ready(analyzer: AnalyzerService, pool: Any, fabric: Fabric, since: datetime, within_s: float) -> None:
    """A healthy verdict, and every switch heard from since ``since`` (its ports' states known): a
    fault on a switch before its first sample is its first state, no transition, and goes unseen
    (the first drill event once rebooted a superspine while the SNMP spines were on their first poll)."""
    deadline = time.monotonic() + within_s
    unheard: list[str] = []
    while True:
        if (analyzer.last_report or {}).get("status") == "healthy":
            async with pool.acquire() as conn:
                rows = await conn.fetch("SELECT DISTINCT switch FROM port_counters WHERE time > $1", since)
            unheard = sorted(set(fabric.switches) - {r["switch"] for r in rows})
            if not unheard:
                return
        if time.monotonic() > deadline:
            why = (
                f"{len(unheard)} switches never heard from ({', '.join(unheard[:5])})"
                if unheard
                else "no healthy verdict"
            )
            raise DemoError(f"{why} within {within_s:.0f} s: the drill needs a clean start")
        await asyncio.sleep(0.5)


class _Drill:
    def __init__(self, opts: DrillOptions, sim: RemoteSim, receiver: Receiver, collector: _Collector, t0: float,
                 say: Say) -> None:  # fmt: skip
        self.opts, self.sim, self.receiver, self.collector = opts, sim, receiver, collector
        self.t0, self.say = t0, say
        self.done = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    async def run(self, campaign: list[Planned]) -> list[Injected]:
        pending, active = list(campaign), list[Planned]()
        running: dict[asyncio.Task[Injected], Planned] = {}
        out: list[Injected] = []
        total = len(campaign)
        while pending or running:
            for ev in list(pending):
                if len(running) >= self.opts.concurrency:
                    break
                if any(footprints_meet(ev, a) for a in active):
                    if EVERYWHERE in ev.footprint:
                        break  # the whole fabric's turn: start nothing past it
                    continue
                pending.remove(ev)
                active.append(ev)
                running[asyncio.create_task(self.one(ev))] = ev
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                ev = running.pop(task)
                active.remove(ev)
                out.append(task.result())
                self.done += 1
                if self.done % 10 == 0 or self.done == total:
                    self.say(f"  {self.done}/{total} events done ({self.now():.0f} s)")
        return sorted(out, key=lambda e: e.start_s)

    def _fired_at(self, places: frozenset[str], since: float) -> set[str]:
        """Fingerprints of incidents touching ``places`` first sent as firing after ``since``."""
        out = set()
        for d in self.receiver.deliveries:
            if d.event != "alert.firing" or d.at - self.t0 < since:
                continue
            alert = d.body.get("alert", {})
            scope, root = alert.get("scope") or {}, alert.get("root_cause") or {}
            at = {*scope.get("switches", ()), *scope.get("servers", ()), root.get("switch"), root.get("server")}
            if at & places:
                out.add(str(alert.get("fingerprint")))
        return out

    def _named(self, ev: Planned, since: float) -> bool:
        """Whether an incident naming the event's place (its root cause) has fired since ``since``:
        only that ends a fault's wait, not a neighbour's incident that merely touches it."""
        return any(d.event == "alert.firing" and d.at - self.t0 >= since
                   and names_place(d.body.get("alert", {}).get("root_cause") or {}, ev.roots)
                   for d in self.receiver.deliveries)  # fmt: skip

    async def _window(self, switch: str, seconds: float) -> None:
        now = datetime.now(UTC)
        window = Window(None, (switch,), (), (), now - timedelta(seconds=1), now + timedelta(seconds=seconds),
                        reason="fabricmon drill: planned reboot")  # fmt: skip
        await add_window(self.collector.pool, window)

    def _resolved(self, fingerprints: set[str]) -> bool:
        """Whether each fingerprint's latest delivery is its resolution (one that fired again after
        it was resolved is a new incident, not over yet)."""
        latest: dict[str, str] = {}
        for d in self.receiver.deliveries:
            latest[str(d.body.get("alert", {}).get("fingerprint"))] = d.event
        return all(latest.get(fp) == "alert.resolved" for fp in fingerprints)

    async def _until(self, cond: Callable[[], bool], within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while not cond():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.25)
        return True

    async def one(self, ev: Planned) -> Injected:
        interval, limit = self.opts.interval_s, self.opts.timeout_s
        start = self.now()
        spec: Mapping[str, Any] = ev.spec
        hosts, roots = ev.hosts, ev.roots
        fault_id: str | None = None
        if ev.kind == "collector_restart":
            await self.collector.restart()
        elif ev.kind == "db_blip":
            await _cut_sessions(self.collector.pool)
        else:
            if ev.kind == "planned_reboot":  # announced first, as a site does: a window over the switch
                await self._window(str(ev.spec["switch"]), 5 + limit + 4 * interval)
            applied = await self.sim.apply(ev.spec)
            fault_id, spec = str(applied["id"]), applied
            if applied.get("swapped_with"):  # a cable swap: the other server's GPU moved too
                hosts = hosts | {str(applied["swapped_with"]).partition(":")[0]}
            if ev.kind == "miswire":
                roots = roots | miswire_roots(applied)
        if ev.benign:
            holds = {"flap_once": 2.0, "pfc_burst": 0.8 * interval, "planned_reboot": 5 + 4 * interval,
                     "fec_burst": float(ev.spec.get("duration_s", 0.0)), "dirty_connector": 6 * interval,
                     "counter_clear": 4 * interval, "clock_step": 6 * interval}  # fmt: skip
            hold = holds.get(ev.kind, 0.0)
            await asyncio.sleep(hold)
        elif ev.must_detect:
            await self._until(lambda: self._named(ev, start), limit)
            await asyncio.sleep(2 * interval)
        else:
            await asyncio.sleep(6 * interval)
        if fault_id is not None:
            await self.sim.clear(fault_id)
        end = self.now()
        await self._until(lambda: self._resolved(self._fired_at(ev.places, start)), limit)
        await asyncio.sleep(2 * interval)
        return Injected(ev.id, ev.kind, ev.benign, start, end, ev.places, roots, hosts, ev.actions,
                        ev.must_detect, dict(spec))  # fmt: skip
