"""``fabricmon analyze``: evaluate the fabric every ``interval_s``, keep the verdict, raise alerts.

Each round: run every check over the latest window (one connection) and the SLOs, read what
fabricmon itself can observe (collector heartbeats), correlate the findings into incidents and
decide each one's action (analyzer.correlation, analyzer.actions; observe inside a maintenance
window: analyzer.coverage), turn them into alert
transitions (each with its webhook deliveries, in one transaction), then store the verdict of the
open incidents with the jobs' health and the oversubscription series, and wake the webhook
sender. A round that cannot reach the database is skipped and retried; alerts and deliveries
live in the database, so a restart neither re-fires nor forgets.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from analyzer.actions import ActionPolicy, decide_all
from analyzer.alertmanager import AlertmanagerPusher
from analyzer.alerts import SyncResult, sync_alerts
from analyzer.budget import FleetLimits
from analyzer.cadence import Beside, Kept, cadences
from analyzer.correlation import correlate
from analyzer.coverage import coverage, mark
from analyzer.engine import Evaluation, context_for, evaluate, lookback_s
from analyzer.executors import ActionExecutors, NoExecutors
from analyzer.fits import Fits
from analyzer.incident_memory import Waits, blind, held_links, hold_unconfirmed, ongoing_storms
from analyzer.incident_model import Incident, Observation
from analyzer.jobs import Job, job_health, load_jobs
from analyzer.leader import LeaderElection
from analyzer.maintenance import windows_between
from analyzer.objectives import Objective, evaluate_objectives
from analyzer.observe import CollectionMemory, observe
from analyzer.payloads import AlertRow, dumps
from analyzer.report import build_report
from analyzer.verdict import open_incidents
from analyzer.webhooks import WebhookSender
from analyzer.withheld import review_withheld
from config.model import Config
from fabric.model import Fabric
from fabric.tasks import owned_tasks
from fabric.waits import wait_event
from store.db import UNAVAILABLE_ERRORS, Connection, Pool
from store.incident_memory import read_memory

log = logging.getLogger(__name__)


def collect_interval(config: Config) -> float:
    """The slowest sampling interval among the protocols in use (freshness and windows follow it)."""
    protocols = {t.protocol for t in config.targets} or {"gnmi"}
    intervals = {"gnmi": config.collector.gnmi_interval_s, "snmp": config.collector.snmp_interval_s}
    return max(intervals[p] for p in protocols)


@dataclass(slots=True)
class Round:
    """One evaluation: findings, objectives and the decided incidents."""

    ev: Evaluation
    objectives: list[Objective]
    incidents: list[Incident]
    observation: Observation
    #: The circuit breaker's host limit for this fabric.
    drain_limit: int
    #: The drain budget and checkpoint breaker across incidents (analyzer/budget.py).
    fleet: FleetLimits | None = None


def confirm_s(config: Config) -> float:
    """How long an incident of symptoms only waits for its root cause before it is sent."""
    th = config.analyzer.thresholds
    return max(th.pfc_storm_min_s, th.stale_intervals * collect_interval(config)) + config.analyzer.interval_s


async def evaluate_round(
    conn: Connection,
    fabric: Fabric,
    config: Config,
    now: datetime,
    memory: CollectionMemory | None = None,
    waits: Waits | None = None,
    kept: dict[str, Kept] | None = None,
    beside: Beside | None = None,
) -> Round:
    """Run the checks and the objectives, then correlate the findings into decided incidents.

    ``memory`` and ``waits`` carry the service's state across rounds (collectors catching up,
    symptom-only incidents waiting for confirmation), ``kept`` the findings of the checks run at
    their own cadence (analyzer/cadence.py), ``beside`` what runs their fits beside the rounds; a
    one-shot check has none of them."""
    interval = collect_interval(config)
    since = now - timedelta(seconds=lookback_s(config.analyzer, interval))
    cover = coverage(await windows_between(conn, since, now), fabric)
    ctx = context_for(fabric, config.analyzer, now, interval, cover, kept, beside)
    ev = await evaluate(conn, ctx)
    objectives = await evaluate_objectives(
        conn, fabric, config.analyzer.slo, now, config.analyzer.thresholds.fatal_outage_s
    )
    observation = await observe(conn, ctx, memory)
    policy = ActionPolicy.from_config(config.alerts)
    switch_links = config.analyzer.thresholds.switch_flap_min_ports
    held = await read_memory(conn)  # what the firing incidents are remembered by
    found = correlate(ev.all_findings, fabric, observation, switch_links, ongoing_storms(held), held_links(held))
    incidents = mark(decide_all(found, fabric, policy), cover, now)
    if waits is not None:
        incidents = hold_unconfirmed(incidents, waits, now, confirm_s(config), blind(ev.all_findings, observation))
    servers = len(fabric.servers)
    fleet = FleetLimits(policy.drain_budget(servers), policy.checkpoint_budget(servers))
    return Round(ev, objectives, incidents, observation, policy.drain_limit(servers), fleet)


async def round_report(
    conn: Connection,
    fabric: Fabric,
    rnd: Round,
    now: datetime,
    extra_jobs: tuple[Job, ...] = (),
    firing: Sequence[AlertRow] | None = None,
) -> dict[str, Any]:
    """The verdict document: statuses from the open incidents (this round's and the stored
    firing ones), each job's health under them. ``firing``: the firing alerts as the round's sync
    left them (:attr:`SyncResult.firing`); read here when the round synced none."""
    if firing is None:
        firing = [AlertRow.from_record(r) for r in await conn.fetch("SELECT * FROM alerts WHERE state = 'firing'")]
    opened = open_incidents(rnd.incidents, firing, rnd.drain_limit)
    gpu_avail = next((o.current for o in rnd.objectives if o.name == "gpu_network_availability"), 1.0)
    jobs = [*await load_jobs(conn), *extra_jobs]
    health = [job_health(j, fabric, opened, gpu_avail, now) for j in jobs]
    return build_report(rnd.ev, rnd.objectives, health, opened)


async def assess(
    conn: Connection, fabric: Fabric, config: Config, now: datetime, extra_jobs: tuple[Job, ...] = ()
) -> tuple[Evaluation, list[Objective], dict[str, Any]]:
    """One read-only evaluation: findings, objectives, incidents, jobs and the report."""
    # no past to confirm against: observe-only incidents are as unconfirmed as in a service's first
    # round, so the one-shot verdict never says more than the running service would
    rnd = await evaluate_round(conn, fabric, config, now, waits=Waits())
    return rnd.ev, rnd.objectives, await round_report(conn, fabric, rnd, now, extra_jobs)


async def store_run(conn: Connection, ev: Evaluation, report: dict[str, Any]) -> None:
    """Keep the oversubscription series, the rail and SLO history the dashboard charts, and the
    run's verdict."""
    ratios = ev.results.ratios
    rows = [
        (ev.at, r.scope, r.name, r.down_gbps, r.up_gbps, None if r.up_gbps == 0 else r.ratio, r.design_ratio)
        for r in ratios
    ]
    rails = [
        (ev.at, r["rail"], r["design_gbps"], r["live_gbps"], r["bottleneck_fraction"], r["load_gbps"])
        for r in report["rails"]
    ]
    slos = [
        (ev.at, o["name"], o["current"], o["target"], o["error_budget_remaining"])
        for o in report["slo"]
        if all(isinstance(o[k], int | float) and math.isfinite(o[k]) for k in ("current", "error_budget_remaining"))
    ]
    async with conn.transaction():
        if rows:
            await conn.copy_records_to_table(
                "oversubscription",
                records=rows,
                columns=["time", "scope", "name", "down_gbps", "up_gbps", "ratio", "design_ratio"],
            )
        if rails:
            await conn.copy_records_to_table(
                "rail_history",
                records=rails,
                columns=["time", "rail", "design_gbps", "live_gbps", "bottleneck_fraction", "load_gbps"],
            )
        if slos:
            await conn.copy_records_to_table(
                "slo_history", records=slos, columns=["time", "objective", "current", "target", "budget_remaining"]
            )
        # the worst leaf or spine; infinite (stored as such) when one has every uplink down
        worst = max((r for r in ratios if r.scope == "switch"), key=lambda r: r.ratio, default=None)
        await conn.execute(
            "INSERT INTO analyzer_runs (time, status, duration_s, findings, report, worst_ratio, worst_switch) "
            "VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7) ON CONFLICT (time) DO NOTHING",
            ev.at,
            report["status"],
            ev.duration_s,
            len(ev.all_findings),
            dumps(report).decode(),  # strict JSON: an infinite ratio (no uplink left) is null
            None if worst is None else worst.ratio,
            None if worst is None else worst.name,
        )


class AnalyzerService:
    """The analyzer loop, and the webhook sender and scheduler actions it feeds.

    ``executors``: what runs the stored scheduler actions while this analyzer leads (the CLI wires
    :class:`schedulers.service.Schedulers` in: :mod:`cli.compose`); none by default."""

    def __init__(self, config: Config, fabric: Fabric, pool: Pool, executors: ActionExecutors | None = None) -> None:
        self.config = config
        self.fabric = fabric
        self.pool = pool
        self.sender = WebhookSender(pool, config.alerts.webhooks, max_attempts_4xx=config.alerts.max_attempts_4xx)
        self.schedulers: ActionExecutors = executors if executors is not None else NoExecutors()
        self.alertmanagers = AlertmanagerPusher.from_config(pool, config, fabric)
        self.last_report: dict[str, Any] | None = None
        self.last_sync: SyncResult | None = None
        self.rounds = 0
        self.failed_rounds = 0
        self.memory = CollectionMemory()
        self.waits = Waits()
        #: The checks run at their own cadence, with what they found last (analyzer/cadence.py).
        self.kept = cadences(config.analyzer)
        #: Runs those checks' fits beside the rounds while this service leads (analyzer/fits.py);
        #: None: they run in the round (:meth:`evaluate_once` called on its own, as tests do).
        self.fits: Fits | None = None
        #: The leader election while :meth:`run` runs with ``analyzer.leader_election``.
        self.election: LeaderElection | None = None
        self._running = False
        self._terms = 0

    async def evaluate_once(
        self, now: datetime | None = None, *, alerts: bool = True, confirm: bool = True
    ) -> dict[str, Any]:
        """One round: evaluate and correlate, sync incidents (unless ``alerts`` is False), then
        store the verdict of the open incidents and wake the sender. ``confirm=False`` sends
        observe-only incidents at once instead of after the confirmation wait (a one-shot round
        over a window written in one go, as fixtures and benchmarks do)."""
        now = now or datetime.now(UTC)
        waits = self.waits if confirm else None
        async with self.pool.acquire() as conn:
            rnd = await evaluate_round(conn, self.fabric, self.config, now, self.memory, waits, self.kept, self.fits)
        result: SyncResult | None = None
        if alerts:
            # what an executor's own breaker withheld since the last round needs review (it never calls back)
            reviewed = await review_withheld(
                self.pool,
                webhooks=self.config.alerts.webhooks,
                settings=self.config.alerts,
                schedulers=self.schedulers.policies,
                idle_timeout_s=self._idle_timeout_s(),
            )
            if reviewed.deliveries:
                self.sender.notify()
            result = await sync_alerts(
                self.pool,
                rnd.incidents,
                now=now,
                hold_down_s=self.config.analyzer.resolve_hold_down_s,
                webhooks=self.config.alerts.webhooks,
                settings=self.config.alerts,
                evaluated_rules=rnd.ev.evaluated_rules | {"collection"},
                unobserved=rnd.observation.unobserved | rnd.observation.starting,
                drain_limit=rnd.drain_limit,
                fleet=rnd.fleet,
                resume_after_s=self.config.alerts.resume_after_s,
                schedulers=self.schedulers.policies,
                idle_timeout_s=self._idle_timeout_s(),
            )
            if result.deliveries:
                self.sender.notify()
            if result.actions:
                self.schedulers.notify()
            self.last_sync = result
        async with self.pool.acquire() as conn:
            report = await round_report(conn, self.fabric, rnd, now, firing=None if result is None else result.firing)
            await store_run(conn, rnd.ev, report)
        self.last_report = report
        self.rounds += 1
        what = f"{report['status']}, {len(rnd.ev.all_findings)} finding(s) in {len(rnd.incidents)} incident(s)"
        if result is None:
            log.info("evaluation (warming up, no alerts yet): %s", what)
        else:
            log.info("evaluation: %s, %s", what, result)
        return report

    def _idle_timeout_s(self) -> float | None:
        """How long the leader's lock-holding transactions may sit idle (None: no election)."""
        return self.election.timing.idle_timeout_s if self.election is not None else None

    async def drain_webhooks(self, timeout_s: float) -> int:
        """Send what is pending (for one-shot runs); return what is still pending after ``timeout_s``."""
        async with owned_tasks("one-shot webhook drain", log) as tasks:
            tasks.start(self.sender.run(), "webhook-sender")
            self.sender.notify()
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            for _ in range(int(timeout_s / 0.2) + 1):  # polls the outbox: deliveries live in the database
                left = sum((await self.sender.pending()).values())
                if not left or loop.time() >= deadline:
                    return left
                await asyncio.sleep(0.2)
            return sum((await self.sender.pending()).values())

    def warmup_s(self) -> float:
        """How long a starting analyzer evaluates without raising alerts.

        Collectors that start together with it have not delivered their first samples yet; without
        a warm-up every switch would page as stale for its first intervals.
        """
        return self.config.analyzer.thresholds.stale_intervals * collect_interval(self.config)

    @property
    def leader(self) -> bool:
        """Whether this service acts as the leader now (for metrics): it holds the analyzer lock,
        or it runs without ``analyzer.leader_election``."""
        return self.election.leader if self.election is not None else self._running

    @property
    def transitions(self) -> int:
        """Leadership changes since :meth:`run` started (for metrics)."""
        return self.election.transitions if self.election is not None else 0

    async def run(self, stop: asyncio.Event) -> None:
        """Evaluate every ``interval_s`` until ``stop``; the sender runs beside. After every round,
        warm-up and failed ones included, the stored incidents go to the Alertmanagers.

        With ``analyzer.leader_election`` (analyzer/leader.py) all of that, the scheduler tasks
        included, runs only while this process leads: it starts when the lock is won and is
        cancelled at once when it is lost. The warm-up counts from this call, not from winning the
        lock: a standby that has run for a warm-up takes over with alerts at once (the collectors
        have been reporting all along); one started together with everything waits it out.
        """
        loop = asyncio.get_running_loop()
        alerts_from = loop.time() + self.warmup_s()
        if not self.config.analyzer.leader_election:
            self._running = True
            try:
                await self._lead(stop, alerts_from, None)
            finally:
                self._running = False
            return
        election = self.election = LeaderElection(self.pool, self.config.analyzer.interval_s)
        election.start()
        try:
            while not stop.is_set():
                async with owned_tasks("analyzer standby", log) as tasks:
                    tasks.start(self._watch_collection(), "standby-heartbeats")
                    leading = await _first(election.wait_leading(), stop)
                if leading:
                    await self._lead(stop, alerts_from, election)
        finally:
            await election.close()  # after the term's tasks stopped: the standby starts on a quiet system

    async def _watch_collection(self) -> None:
        """While standing by, read the collectors' heartbeats every interval into :attr:`memory`:
        a collector that was unhealthy just before a takeover keeps its catch-up grace with the
        new leader (analyzer/observe.py), instead of its switches' silence being judged at once."""
        while True:
            now = datetime.now(UTC)
            ctx = context_for(self.fabric, self.config.analyzer, now, collect_interval(self.config))
            try:
                async with self.pool.acquire() as conn:
                    await observe(conn, ctx, self.memory)
            except UNAVAILABLE_ERRORS as exc:
                log.debug("standby: collector heartbeats unreadable: %s", exc)
            except Exception:  # a bad read must not end the standby
                log.exception("standby: reading collector heartbeats failed; retrying next interval")
            await asyncio.sleep(self.config.analyzer.interval_s)

    async def _lead(self, stop: asyncio.Event, alerts_from: float, election: LeaderElection | None) -> None:
        """One term as leader: rounds, sender, scheduler tasks and pushes until ``stop`` (the round
        in progress finishes) or the lock is lost (everything is cancelled at once). A task of the
        term that fails ends it: everything is cancelled, and its error raised (fabric/tasks.py)."""
        if self._terms:  # another leader evaluated meanwhile: what this process remembers is stale
            self.waits.clear()  # (not the heartbeat memory: the standby kept that current)
            self.kept = cadences(self.config.analyzer)
        self._terms += 1
        deposed = False
        try:
            # leaving the block cancels what still runs: the rounds have ended on stop; deposed, the
            # round in progress is dropped
            async with owned_tasks("analyzer term", log) as tasks:
                self.fits = Fits(self.pool, tasks)  # a fit in progress ends with the term
                tasks.start(self.sender.run(), "webhook-sender")
                tasks.start(self.schedulers.run(), "schedulers")
                self.alertmanagers.start()
                ends = [tasks.start(self._rounds(stop, alerts_from, election), "analyzer-rounds")]
                if election is not None:  # ... or as soon as the election loses it
                    ends.append(tasks.start(election.wait_standby(), "leadership-watch"))
                await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
                deposed = election is not None and not election.leader
                if not deposed:  # a clean stop: the scheduler action in flight is recorded, not dropped
                    await self.schedulers.close()
        finally:
            self.fits = None
            await self.alertmanagers.close(grace_s=0.0 if deposed else 1.0)

    async def _rounds(self, stop: asyncio.Event, alerts_from: float, election: LeaderElection | None) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            # a round starts only on a fresh check of the lock (a leader resumed after a freeze
            # must not act on the lease it had before)
            if election is not None and not await election.confirm():
                return
            try:
                await self.evaluate_once(alerts=loop.time() >= alerts_from)
            except UNAVAILABLE_ERRORS as exc:
                self.failed_rounds += 1
                log.warning("evaluation skipped, database unavailable: %s", exc)
            except Exception:  # one bad round must not end the analyzer: log it, try the next
                self.failed_rounds += 1
                log.exception("evaluation failed; retrying next round")
            self.alertmanagers.push(datetime.now(UTC))
            await wait_event(stop, self.config.analyzer.interval_s)


async def _first(waiter: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Wait for ``waiter`` or ``stop``; whether ``waiter`` came first (and ``stop`` is not set)."""
    async with owned_tasks("leader election wait", log) as tasks:
        first = tasks.start(waiter, "wait-leading")
        await asyncio.wait([first, tasks.start(stop.wait(), "stop")], return_when=asyncio.FIRST_COMPLETED)
    return first.done() and not first.cancelled() and not stop.is_set()
