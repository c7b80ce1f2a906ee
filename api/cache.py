"""The latest analyzer verdict, held in memory for the API, and what is derived from it once.

The analyzer stores one report per evaluation (table ``analyzer_runs``). A background task owned
by the app (:meth:`ReportCache.run`) looks every ``refresh_s`` for a newer one (one index probe),
and only then loads and indexes it: findings per switch and per (rail, group) cell, the rails'
PFC pause ratios over that evaluation's window, and a per-version memo for rendered bodies. The
firing alerts (with the servers in their blast radius) are reloaded on the same tick when they
changed. So ``/v1/health``, ``/v1/rails``, ``/v1/slo``, ``/metrics`` and job health cost at most
one small query, and their cost does not grow with the fabric. A database that is away leaves
the last verdict in place (``age_s`` shows its age).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from analyzer.engine import Status
from analyzer.findings import SEVERITY_ORDER, Finding, Scope
from analyzer.pfc import pause_ratio
from analyzer.service import collect_interval
from analyzer.verdict import OpenIncident
from config.model import Config
from fabric.model import Fabric, Role
from fabric.waits import wait_event
from store.db import UNAVAILABLE_ERRORS, Connection, Pool, PostgresError, Record

log = logging.getLogger(__name__)

T = TypeVar("T")

_PFC_SQL = """
SELECT switch, port, max(greatest(rx, tx)) AS pps
FROM (SELECT switch, port, priority, avg(rx_pause_pps) AS rx, avg(tx_pause_pps) AS tx
      FROM pfc_counters WHERE time > $1 AND time <= $2 AND (rx_pause_pps > 0 OR tx_pause_pps > 0)
      GROUP BY switch, port, priority) p
GROUP BY switch, port
"""
_FIRING_SIG_SQL = "SELECT count(*), max(id), max(last_seen_at) FROM alerts WHERE state = 'firing'"
_FIRING_SQL = """
SELECT id, fingerprint, rule, severity, summary, started_at, scope -> 'servers' AS servers,
       scope -> 'rails' AS rails, (scope ->> 'gpus')::int AS gpus, recommended_action, action_hosts, needs_review,
       details -> 'efficiency_loss' AS efficiency_loss, root_cause ->> 'key' AS root_key,
       jsonb_path_query_array(symptoms, '$[*].rule') AS symptom_rules,
       jsonb_path_query_array(symptoms, '$[*].key') AS symptom_keys
FROM alerts WHERE state = 'firing' ORDER BY started_at DESC, id DESC
"""


def finding_from(d: dict[str, Any]) -> Finding:
    """A stored finding dict back into a :class:`Finding`."""
    s = d.get("scope") or {}
    scope = Scope(
        switches=tuple(s.get("switches", ())),
        ports=tuple(s.get("ports", ())),
        rails=tuple(s.get("rails", ())),
        groups=tuple(s.get("groups", ())),
        servers=tuple(s.get("servers", ())),
        gpus=int(s.get("gpus", 0)),
    )
    return Finding(d["rule"], d["key"], d["severity"], d["summary"], scope, dict(d.get("details") or {}))


@dataclass(slots=True)
class Verdict:
    """One stored report and its indexes (immutable once built)."""

    time: datetime
    report: dict[str, Any]
    findings: list[Finding]
    by_switch: dict[str, list[Finding]]
    by_rail: dict[int, list[Finding]]
    by_cell: dict[tuple[int, int], list[Finding]]
    rail_pfc: dict[int, float] = field(default_factory=dict)
    memo: dict[str, Any] = field(default_factory=dict)
    #: ``rule|key`` of each finding an incident holds → the worst severity of those incidents.
    held: dict[str, str] = field(default_factory=dict)

    def status(self, findings: list[Finding]) -> Status:
        """A place's status: the worst severity of the sent incidents holding its findings.

        One severity everywhere: a finding no incident holds (pending confirmation, or judged a
        symptom of nothing) colours nothing, and a finding takes its incident's severity, so a
        rail shows what the health verdict and the alerts say about it."""
        worst = max((SEVERITY_ORDER[self.held[m]] for f in findings if (m := f"{f.rule}|{f.key}") in self.held),
                    default=0)  # fmt: skip
        return "critical" if worst >= 2 else "degraded" if worst >= 1 else "healthy"

    def memoized(self, key: str, build: Callable[[], T]) -> T:
        """``build()`` once per verdict."""
        if key not in self.memo:
            self.memo[key] = build()
        value: T = self.memo[key]
        return value


@dataclass(frozen=True, slots=True)
class Firing:
    """A firing alert (an open incident), as job health needs it."""

    id: int
    rule: str
    severity: str
    summary: str
    started_at: datetime
    servers: frozenset[str]
    incident: OpenIncident


def _firing(r: Record) -> Firing:
    servers = frozenset(json.loads(r["servers"]) if r["servers"] else ())
    rules = json.loads(r["symptom_rules"]) if r["symptom_rules"] else []
    keys = json.loads(r["symptom_keys"]) if r["symptom_keys"] else []
    loss = json.loads(r["efficiency_loss"]) if r["efficiency_loss"] else 0.0
    incident = OpenIncident(
        fingerprint=r["fingerprint"],
        id=r["id"],
        rule=r["rule"],
        rules=frozenset({r["rule"], *map(str, rules)}),
        severity=r["severity"],
        action=r["recommended_action"] or "observe",
        action_hosts=tuple(r["action_hosts"] or ()),
        needs_review=bool(r["needs_review"]),
        pending=False,
        summary=r["summary"],
        servers=servers,
        rails=tuple(int(x) for x in (json.loads(r["rails"]) if r["rails"] else [])),
        gpus=int(r["gpus"] or 0),
        efficiency_loss=float(loss) if isinstance(loss, int | float) else 0.0,
        symptoms=len(rules),
        members=frozenset({f"{r['rule']}|{r['root_key']}", *(f"{a}|{b}" for a, b in zip(rules, keys, strict=False))}),
        seen_now=False,
    )
    return Firing(r["id"], r["rule"], r["severity"], r["summary"], r["started_at"], servers, incident)


def index(time_: datetime, report: dict[str, Any]) -> Verdict:
    """Index a report's findings by switch, rail and (rail, group)."""
    findings = [finding_from(f) for check in report.get("checks", {}).values() for f in check.get("findings", [])]
    findings.sort(key=lambda f: -SEVERITY_ORDER[f.severity])
    by_switch: dict[str, list[Finding]] = defaultdict(list)
    by_rail: dict[int, list[Finding]] = defaultdict(list)
    by_cell: dict[tuple[int, int], list[Finding]] = defaultdict(list)
    for f in findings:
        for name in {*f.scope.switches, *(p.partition(":")[0] for p in f.scope.ports)}:
            by_switch[name].append(f)
        for r in f.scope.rails:
            by_rail[r].append(f)
            for g in f.scope.groups:
                by_cell[(r, g)].append(f)
    return Verdict(time_, report, findings, dict(by_switch), dict(by_rail), dict(by_cell), held=held_severity(report))


def held_severity(report: dict[str, Any]) -> dict[str, str]:
    """``rule|key`` → the worst severity of the sent (not pending) incidents that hold that finding."""
    out: dict[str, str] = {}
    for inc in report.get("incidents", []):
        severity = str(inc.get("severity"))
        if inc.get("pending") or severity not in SEVERITY_ORDER:
            continue
        for member in inc.get("members", ()):
            if SEVERITY_ORDER[severity] > SEVERITY_ORDER.get(out.get(str(member), "info"), 0):
                out[str(member)] = severity
    return out


class ReportCache:
    """The newest verdict and the firing-alert counts, refreshed by :meth:`run`."""

    def __init__(self, pool: Pool, fabric: Fabric, config: Config, *, refresh_s: float = 1.0) -> None:
        self.pool = pool
        self.fabric = fabric
        self.refresh_s = refresh_s
        interval = self.interval_s = collect_interval(config)
        self.window_s = max(config.analyzer.window_intervals * interval, 2.5 * interval)
        self.stale_after_s = max(3 * config.analyzer.interval_s, 30.0)
        self.verdict: Verdict | None = None
        self.firing: list[Firing] = []
        self._firing_sig: tuple[Any, ...] | None = None
        self.refreshes = 0
        self.refresh_errors = 0
        self._loaded = False
        self._lock = asyncio.Lock()
        self._rail_ports: dict[tuple[str, str], tuple[int, float]] = {}
        self._rail_port_count: dict[int, int] = defaultdict(int)
        for name, sw in fabric.switches.items():
            if sw.rail is None or sw.role is Role.SUPERSPINE:
                continue
            for p in fabric.ports(name):
                if p.peer is not None:
                    self._rail_ports[(name, p.name)] = (sw.rail, p.speed_gbps * 1e9)
                    self._rail_port_count[sw.rail] += 1

    def age_s(self, now: datetime | None = None) -> float | None:
        """Seconds since the verdict's evaluation."""
        if self.verdict is None:
            return None
        return max(0.0, ((now or datetime.now(UTC)) - self.verdict.time).total_seconds())

    def stale(self, now: datetime | None = None) -> bool:
        age = self.age_s(now)
        return age is None or age > self.stale_after_s

    async def current(self) -> Verdict | None:
        """The verdict, loading it on first use (before the background task's first tick)."""
        if not self._loaded:
            await self.refresh()
        return self.verdict

    async def refresh(self) -> None:
        """Load a newer report if there is one, and the firing-alert counts."""
        async with self._lock, self.pool.acquire() as conn:
            newest = await conn.fetchval("SELECT max(time) FROM analyzer_runs")
            if newest is not None and (self.verdict is None or newest > self.verdict.time):
                raw = await conn.fetchval("SELECT report FROM analyzer_runs WHERE time = $1", newest)
                verdict = index(newest, dict(json.loads(raw)))
                verdict.rail_pfc = await self._rail_pfc(conn, newest)
                self.verdict = verdict
            await self._refresh_firing(conn)
            self._loaded = True
            self.refreshes += 1

    @property
    def alerts_firing(self) -> dict[str, int]:
        """Firing alerts per severity."""
        out: dict[str, int] = defaultdict(int)
        for a in self.firing:
            out[a.severity] += 1
        return dict(out)

    async def _refresh_firing(self, conn: Connection) -> None:
        """Reload the firing alerts when the set or any of them changed (one cheap probe otherwise)."""
        sig = tuple(await conn.fetchrow(_FIRING_SIG_SQL) or ())
        if sig == self._firing_sig:
            return
        rows = await conn.fetch(_FIRING_SQL)
        self.firing = [_firing(r) for r in rows]
        self._firing_sig = sig

    async def _rail_pfc(self, conn: Connection, at: datetime) -> dict[int, float]:
        """Per rail: the mean share of time its cabled switch ports' links were paused (either direction)."""
        held: dict[int, float] = defaultdict(float)
        since = at - timedelta(seconds=self.window_s)
        for r in await conn.fetch(_PFC_SQL, since, at):
            hit = self._rail_ports.get((r["switch"], r["port"]))
            if hit is not None:
                held[hit[0]] += pause_ratio(r["pps"], hit[1])
        return {rail: round(held[rail] / n, 6) for rail, n in self._rail_port_count.items()}

    async def run(self, stop: asyncio.Event) -> None:
        """Refresh every ``refresh_s`` until ``stop``; failures are logged and retried."""
        warned = False
        while not stop.is_set():
            started = time.monotonic()
            try:
                async with asyncio.timeout(max(10.0, 5 * self.refresh_s)):
                    await self.refresh()
                warned = False
            except (*UNAVAILABLE_ERRORS, PostgresError) as exc:
                self.refresh_errors += 1
                if not warned:
                    log.warning("cannot refresh the latest verdict: %s", type(exc).__name__)
                    warned = True
            pause = max(0.05, self.refresh_s - (time.monotonic() - started))
            await wait_event(stop, pause)
