"""The demo, start to finish: embedded store → simulated fabric → collectors (gNMI and SNMP) →
analyzer → API and dashboard → a webhook receiver; then a tour of faults, each timed from
injection to finding to webhook to resolution.

Demo settings are faster than production defaults (documented in the README): 2 s sampling
and evaluation, so a fault is found in seconds rather than in a minute.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from analyzer.service import AnalyzerService
from api.app import create_app
from cli.service import database, serving
from collector.metrics import CollectorMetrics
from collector.runner import CollectorService, plan
from config.model import Config
from demo.receiver import Delivery, Receiver
from demo.tour import Step
from fabric.errors import FabricmonError
from fabric.model import FabricParams
from fabric.tasks import owned_tasks, stop_task
from fabric.waits import wait_event
from simulator.nos import MIXED, Nos
from simulator.runner import RunningSim, SimEndpoints, SimOptions, start_sim, stop_sim
from simulator.sim_config import sim_config
from store.jobs import Job, save_job

JOB_ID = "llm-70b-pretrain"

Say = Callable[[str], None]


#: A step's time limit, and the wait for the first healthy verdict, in sampling intervals.
STEP_INTERVALS = 8
HEALTHY_INTERVALS = 8
#: Past this many GPUs the default interval grows with the fabric (see :func:`auto_interval`).
SMALL_FABRIC_GPUS = 1024


class DemoError(FabricmonError, RuntimeError):
    """The demo could not go on (e.g. the fabric never turned healthy)."""


def auto_interval(gpus: int) -> float:
    """The default sampling interval: 2 s up to 1,024 GPUs, then 2 s per 512 GPUs (16,384: 64 s).

    Simulator, collectors, analyzer and API share one process here; at 16,384 GPUs a sample
    round is ~2.6M counter values, which that one process gets through in well under a minute
    (docs/benchmarks.md).
    """
    return 2.0 if gpus <= SMALL_FABRIC_GPUS else 2.0 * math.ceil(gpus / 512)


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``fabricmon demo`` was asked for."""

    gpus: int = 512
    steps: tuple[Step, ...] = ()
    tour: str = "tour"
    duration_s: float | None = None
    listen: str = "127.0.0.1:8080"
    interval_s: float = 2.0
    #: Port names of the simulated fabric (:mod:`fabric.naming`): every NOS's by default.
    naming: str = "mixed"
    #: At least this long for each fault to be found (and, after clearing, resolved); never
    #: less than :data:`STEP_INTERVALS` sampling intervals, so a large fabric's slower pace fits.
    step_timeout_s: float = 60.0

    @property
    def timeout_s(self) -> float:
        """How long one step may take to be found, fire its webhook or resolve."""
        return max(self.step_timeout_s, STEP_INTERVALS * self.interval_s)

    seed: int = 1
    #: The switches' notification shapes (SPEC §9.2): by default every NOS the simulator speaks.
    nos: tuple[Nos, ...] = MIXED


@dataclass(slots=True)
class StepResult:
    """What happened to one injected fault."""

    title: str
    kind: str
    found: bool = False
    found_s: float | None = None
    webhook_s: float | None = None
    resolved_s: float | None = None
    summary: str = ""
    gpus: int = 0
    jobs: list[str] = field(default_factory=list)
    action: str | None = None
    #: The incident the fault became, and what its receiver was sent about it.
    fingerprint: str | None = None
    incident: str | None = None
    rule: str | None = None
    symptoms: list[str] = field(default_factory=list)
    firing: int = 0
    resolved: int = 0
    actions: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """One firing (plus at most one escalation) and one resolved delivery, all with one action."""
        return 1 <= self.firing <= 2 and self.resolved == 1 and len(set(self.actions)) == 1


@dataclass(slots=True)
class DemoResult:
    """The demo's report."""

    gpus: int
    tour: str
    steps: list[StepResult] = field(default_factory=list)
    unexpected_alerts: list[str] = field(default_factory=list)
    deliveries: int = 0
    api: str = ""

    @property
    def ok(self) -> bool:
        return all(s.found and s.webhook_s is not None and s.clean for s in self.steps) and not self.unexpected_alerts

    def as_dict(self) -> dict[str, Any]:
        out = {**asdict(self), "ok": self.ok}
        for step, d in zip(self.steps, out["steps"], strict=True):
            d["clean"] = step.clean
        return out


#: The simulator's addresses are bound on loopback (ports: whichever it got).
_LOOPBACK = SimOptions(gnmi="127.0.0.1:0", snmp="127.0.0.1:0", control="127.0.0.1:0")


def demo_config(sim: SimEndpoints, opts: DemoOptions, webhook: str, secret: str, dsn: str,
                spool_dir: Path | None = None) -> Config:  # fmt: skip
    """fabricmon's config for the simulated fabric, at demo speed (``spool_dir``: the writers' own,
    for a run on a scratch database whose rows must never reach another run's)."""
    data: dict[str, Any] = sim_config(
        gnmi_address=sim.gnmi,
        snmp_address=sim.snmp,
        params=FabricParams(gpus=opts.gpus),
        fabric=sim.fabric,
        naming=opts.naming,
        gnmi_interval_s=opts.interval_s,
        snmp_interval_s=opts.interval_s,
        nos=sim.nos or None,
        ca_file=sim.ca_file,
    )
    writer: dict[str, Any] = {"flush_interval_s": 0.5}
    if spool_dir is not None:
        writer["spool_dir"] = str(spool_dir)
    data["database"] = {"dsn": dsn, "writer": writer}
    data["analyzer"] = {
        "interval_s": opts.interval_s,
        "resolve_hold_down_s": 2 * opts.interval_s,
        "thresholds": {"pfc_storm_min_s": 2 * opts.interval_s, "flap_window_s": 10 * opts.interval_s},
    }
    data["alerts"] = {"webhooks": [{"url": webhook, "secret": secret, "timeout_s": 5, "backoff_initial_s": 0.5,
                                    "backoff_max_s": 5}]}  # fmt: skip
    data["api"] = {"listen": opts.listen}
    return Config.model_validate(data)


async def run_demo(opts: DemoOptions, dsn: str, say: Say, stop: asyncio.Event) -> DemoResult:
    """Run the whole demo; return its report (the API stays up until ``stop`` or the duration)."""
    started = time.monotonic()
    result = DemoResult(gpus=opts.gpus, tour=opts.tour)
    secret = secrets.token_hex(16)
    receiver = Receiver(secret, on_delivery=lambda d: say(_delivery_line(d)))
    webhook = await receiver.start()
    names = "the swp plan's" if opts.naming == "swp" else f"{opts.naming} NOS"
    say(f"building a {opts.gpus}-GPU AIPod fabric with {names} port names and simulating every switch"
        " (gNMI for leaves, each in its NOS's shape; SNMP for spines)")  # fmt: skip
    tls_dir = Path(tempfile.mkdtemp(prefix="fabricmon-demo-tls-"))  # gNMI over TLS, as a fresh install runs it
    try:
        sim = await start_sim(SimOptions(params=FabricParams(gpus=opts.gpus), gnmi="127.0.0.1:0", snmp="127.0.0.1:0",
                                         control="127.0.0.1:0", seed=opts.seed, nos=opts.nos,
                                         naming=opts.naming, tls_dir=tls_dir))  # fmt: skip
    except BaseException:
        shutil.rmtree(tls_dir, ignore_errors=True)
        raise
    try:
        assert sim.fabric is not None and sim.state is not None
        config = demo_config(sim.endpoints(_LOOPBACK), opts, webhook, secret, dsn)
        async with database(dsn, config, sim.fabric) as pool:
            hosts = [f"srv-g1-{i:03d}" for i in range(1, 17)]
            await save_job(pool, Job(JOB_ID, tuple(hosts), datetime.now(UTC), 21.0))
            say(f"registered job {JOB_ID} on {len(hosts)} servers ({len(hosts) * 8} GPUs): srv-g1-001..016")
            collector = CollectorService(config, sim.fabric, pool, plan(config, sim.fabric))
            analyzer = AnalyzerService(config, sim.fabric, pool)
            app = create_app(config, sim.fabric, pool=pool,
                             extra_collectors=[CollectorMetrics(collector.pipeline, collector.collectors)])  # fmt: skip
            services_stop = asyncio.Event()
            async with serving(app, opts.listen), owned_tasks("demo services") as services:
                services.start(collector.run(services_stop), "collector")
                services.start(analyzer.run(services_stop), "analyzer")
                result.api = f"http://{opts.listen}/"
                say(f"dashboard: {result.api}   API: {result.api}v1/health   webhooks → {webhook}")
                first, hint = max(90, HEALTHY_INTERVALS * opts.interval_s), "collectors behind? try a longer --interval"
                await _wait(lambda: _healthy(analyzer), first, f"healthy verdict ({hint})")
                say("the fabric is healthy; starting the tour")
                for step in opts.steps:
                    bound = step.bind(sim.fabric)
                    result.steps.append(await _play(bound, sim, analyzer, receiver, opts, say))
                if not opts.steps:
                    await _watch_clean(analyzer, opts, started, stop, result, say)
                result.deliveries = len(receiver.deliveries)
                result.unexpected_alerts += [s for s in _strays(receiver, result)
                                             if s not in result.unexpected_alerts]  # fmt: skip
                yield_until = None if opts.duration_s is None else started + opts.duration_s
                await _linger(stop, yield_until, say)
                services_stop.set()
    finally:
        await stop_sim(sim)
        await receiver.stop()
        shutil.rmtree(tls_dir, ignore_errors=True)
    return result


def _healthy(analyzer: AnalyzerService) -> bool:
    report = analyzer.last_report
    return report is not None and report["status"] == "healthy"


async def _wait(cond: Callable[[], bool], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not cond():
        if time.monotonic() > deadline:
            raise DemoError(f"no {what} within {within_s:.0f} s")
        await asyncio.sleep(0.25)


def _find(analyzer: AnalyzerService, step: Step) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The expected finding and the (sent, not pending) incident that holds it."""
    report = analyzer.last_report or {}
    for check in report.get("checks", {}).values():
        for f in check["findings"]:
            if step.matches(f["rule"], f["key"]):
                member = f"{f['rule']}|{f['key']}"
                for inc in report.get("incidents", []):
                    if member in inc.get("members", []) and not inc.get("pending"):
                        return dict(f), dict(inc)
    return None


async def _play(step: Step, sim: RunningSim, analyzer: AnalyzerService, receiver: Receiver, opts: DemoOptions,
                say: Say) -> StepResult:  # fmt: skip
    assert sim.state is not None
    res = StepResult(step.title, str(step.fault.get("kind")))
    say(f"▶ injecting: {step.title}  {step.fault}")
    t0 = time.monotonic()
    applied = sim.state.apply(step.fault)
    found: tuple[dict[str, Any], dict[str, Any]] | None = None
    while time.monotonic() - t0 < opts.timeout_s:
        found = _find(analyzer, step)
        if found is not None:
            break
        await asyncio.sleep(0.2)
    if found is None:
        say(f"  ✗ not found within {opts.timeout_s:.0f} s (expected {step.rule})")
        sim.state.clear(applied.id)
        return res
    finding, incident = found
    res.found, res.found_s = True, time.monotonic() - t0
    res.summary, res.gpus = finding["summary"], incident["gpus"]
    say(f"  ✓ found after {res.found_s:.1f} s: {finding['summary']}  [{res.gpus} GPUs]")
    if step.story:
        say(f"    {step.story}")
    fp = res.fingerprint = incident["fingerprint"]
    seen: set[str] = set()
    watcher = asyncio.create_task(_members(analyzer, fp, seen))
    fired = await receiver.wait_for("alert.firing", fp, opts.timeout_s - (time.monotonic() - t0))
    if fired is not None:
        res.webhook_s = fired.at - t0
        res.jobs = [j["id"] for j in fired.body.get("jobs", [])]
        res.action = fired.body.get("recommended_action")
        alert_id = fired.body.get("alert", {}).get("id")
        if alert_id is not None:  # from the incident, its map cells, rail, switch and port charts
            say(f"    follow it in the dashboard: http://{opts.listen}/#/incident/{alert_id}")
    sim.state.clear(applied.id)
    t1 = time.monotonic()
    resolved = await receiver.wait_for("alert.resolved", fp, opts.timeout_s)
    if resolved is not None:
        res.resolved_s = time.monotonic() - t1
        alert = resolved.body.get("alert", {})
        res.incident, res.rule = str(alert.get("id")), alert.get("rule")
        say(f"  ✓ cleared; incident resolved {res.resolved_s:.1f} s later")
    await stop_task(watcher, "watching the incident's rules")
    res.symptoms = sorted({r for r in seen if r != res.rule})
    await _wait(lambda: _healthy(analyzer) or time.monotonic() - t1 > opts.timeout_s, opts.timeout_s + 5,
                "healthy fabric")  # fmt: skip
    mine = [d for d in receiver.deliveries if d.body.get("alert", {}).get("fingerprint") == fp]
    res.firing = sum(d.event == "alert.firing" for d in mine)
    res.resolved = sum(d.event == "alert.resolved" for d in mine)
    res.actions = [str(d.body.get("recommended_action")) for d in mine]
    verdict = "one incident" if res.clean else "NOT one clean incident"
    say(f"  {'✓' if res.clean else '✗'} {verdict}: {res.firing} firing + {res.resolved} resolved, "
        f"action {', '.join(dict.fromkeys(res.actions)) or 'none'}"
        + (f"; root {res.rule}, symptoms {', '.join(res.symptoms) or 'none'}" if res.rule else ""))  # fmt: skip
    return res


async def _watch_clean(analyzer: AnalyzerService, opts: DemoOptions, started: float, stop: asyncio.Event,
                       result: DemoResult, say: Say) -> None:  # fmt: skip
    """A clean run: watch for the duration and report every incident that opens (there should be
    none). Pending ones (unconfirmed, never sent) are not alerts; every delivery is counted too."""
    until = started + (opts.duration_s or 30.0)
    say("clean run: no faults; watching for false alarms")
    while time.monotonic() < until and not stop.is_set():
        report = analyzer.last_report or {}
        for inc in report.get("incidents", []):
            if not inc.get("pending") and inc["summary"] not in result.unexpected_alerts:
                result.unexpected_alerts.append(inc["summary"])
                say(f"  ✗ unexpected incident: {inc['summary']}")
        await asyncio.sleep(0.5)


async def _linger(stop: asyncio.Event, until: float | None, say: Say) -> None:
    if until is None:
        say("tour done. The API and dashboard stay up: Ctrl-C to stop.")
        await stop.wait()
        return
    await wait_event(stop, max(0.0, until - time.monotonic()))


async def _members(analyzer: AnalyzerService, fingerprint: str, into: set[str]) -> None:
    """Collect the rules an incident held while it was open (its symptoms come and go)."""
    while True:
        for inc in (analyzer.last_report or {}).get("incidents", []):
            if inc["fingerprint"] == fingerprint:
                into.update(inc.get("rules", []))
        await asyncio.sleep(0.25)


def _strays(receiver: Receiver, result: DemoResult) -> list[str]:
    """Incidents sent about that belong to no fault of the tour (a second incident for one fault,
    a false alarm)."""
    mine = {s.fingerprint for s in result.steps}
    out: dict[str, str] = {}
    for d in receiver.deliveries:
        alert = d.body.get("alert", {})
        if alert.get("fingerprint") not in mine:
            out.setdefault(str(alert.get("fingerprint")), str(alert.get("summary")))
    return list(out.values())


def _delivery_line(d: Delivery) -> str:
    alert = d.body.get("alert", {})
    jobs = ", ".join(j["id"] for j in d.body.get("jobs", [])) or "no job"
    return (f"  ↪ webhook {d.event} (signed, delivery {d.delivery_id[:8]}): {alert.get('rule')} "
            f"[{alert.get('severity')}] → {d.body.get('recommended_action')}"
            f"{' (needs review)' if d.body.get('needs_review') else ''}; "
            f"{len(alert.get('symptoms', []))} symptom(s); jobs: {jobs}")  # fmt: skip
