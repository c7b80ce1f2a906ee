"""Stability SLOs for long training runs: targets, error budgets and multi-window burn rates.

Two objectives, measured from the link events the collectors store:

* ``link_availability``: the share of link-time the fabric's links were up (each physical link
  counted once, from its lower-tier end: the leaf end of a server cable, the uplink end of a
  leaf↔spine or spine↔superspine link).
* ``gpu_network_availability``: the monthly probability that a GPU's own network path (its NIC
  cable) suffers no training-fatal outage (longer than ``fatal_outage_s``). This is the ``a`` of
  FABRIC.md's ``1 - a^N``: with it, a job's interruption probability for its remaining days.

Semantics, where the spec is silent:

* **An outage is an interval.** A completed one runs from ``time - down_s`` to ``time`` of its
  ``up`` event; an ongoing one from its port's latest ``down`` event (later than its latest ``up``
  event) to now. A port whose samples show it up again after such a ``down`` event although no
  ``up`` event was recorded (the collector restarted meanwhile) was down until its first up
  sample, not forever. Every window counts the part of every outage that overlaps it, whenever
  the outage began or ended: a link down for 2 h burns the whole 1 h window. Overlapping
  intervals of one port count once.
* **Fatal outages** (``gpu_network_availability``): outages on server links (leaf down-ports)
  that overlap the measured window and last longer than ``fatal_outage_s``, completed or still
  running (a server link down now for longer than that is a fatal outage now, not when it ends).
  ``a = 1 - fatal outages per GPU-month`` over the measured history.
* **Measured history.** The error budget, availability and fatal-outage rate are measured over
  the history the deployment has: from its earliest stored data (the first ``port_counters``,
  ``link_events`` or ``oversubscription`` row; the last is the analyzer's own 90-day series, so
  a deployment older than raw-telemetry retention still counts as old), capped at
  ``slo.window_days``. ``window_days`` stays the configured window; ``measured_days`` is what was
  measured. A week-old deployment with an hour of outage has spent a week's budget, not a
  thirtieth of a month's. No data at all: nothing measured, ``current`` 1.0, budget untouched.
  A short history extrapolates boldly: one fatal outage in the first day is 30 a month.
* **Error budget**: ``1 - target``; ``error_budget_remaining`` is the unspent share of it over
  the measured history (negative when overspent).
* **Burn rate** over a window: the bad fraction there divided by ``1 - target`` (1.0 spends the
  budget exactly over the SLO window), for the windows of :data:`WINDOWS` (each capped at the
  measured history, like the budget). Alerts follow the Google SRE workbook's multi-window,
  multi-burn-rate rule (chapter "Alerting on SLOs"): **page** (``burn_alert: "page"``, status
  critical) when the 1 h *and* the 5 min windows both burn faster than ``slo.fast_burn`` (14.4: 2 %
  of a 30-day budget in an hour); **ticket** (``"ticket"``, status warning) when the 6 h *and* the
  30 min windows both burn faster than ``slo.slow_burn`` (6: 5 % in 6 h). The short window makes
  the alert stop soon after the burn stops. An overspent budget is critical too.
  ``gpu_network_availability`` has no burn rates: its budget is counted in fatal outages per
  GPU-month (at 512 GPUs and 0.99999, a two-hundredth of one outage), so any fatal outage spends
  it at once and the status says so; extrapolating one outage in 5 minutes to a month says
  nothing more (the ``link_outage`` finding alerts on it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from analyzer.config import SloConfig
from analyzer.slo import p_interrupt
from fabric.model import Fabric, LinkKind
from store.db import Connection

#: Burn-rate windows, in seconds.
WINDOWS: dict[str, float] = {"5m": 300.0, "30m": 1800.0, "1h": 3600.0, "6h": 21600.0}
#: Multi-window alerts: (alert, long window, short window); thresholds from ``slo.fast_burn``/``slow_burn``.
BURN_ALERTS: tuple[tuple[str, str, str], ...] = (("page", "1h", "5m"), ("ticket", "6h", "30m"))

_COMPLETED_SQL = """
SELECT switch, port, time, down_s FROM link_events
WHERE time > $1 AND time <= $2 AND new_status = 'up' AND down_s IS NOT NULL
"""
# Ports whose latest transition up to now is 'down', with their first up sample after it (a
# restarted collector records no transition for a port it first sees up again).
_OPEN_SQL = """
SELECT d.switch, d.port, d.time AS since, (
    SELECT min(u.time) FROM port_counters u
    WHERE u.switch = d.switch AND u.port = d.port AND u.time > d.time AND u.time <= $1 AND u.oper_status = 1
) AS back_up
FROM (
    SELECT DISTINCT ON (switch, port) switch, port, new_status, time FROM link_events
    WHERE time <= $1 AND new_status IN ('up', 'down')
    ORDER BY switch, port, time DESC
) d
WHERE d.new_status = 'down'
"""
# The deployment's earliest data; a row at or before the window's start anywhere ends the
# search early (the oldest chunks may be compressed: EXISTS reads one row, min() reads more).
_HISTORY_SQL = """
SELECT CASE
    WHEN EXISTS (SELECT 1 FROM port_counters WHERE time <= $1)
      OR EXISTS (SELECT 1 FROM link_events WHERE time <= $1)
      OR EXISTS (SELECT 1 FROM oversubscription WHERE time <= $1) THEN $1::timestamptz
    ELSE least((SELECT min(time) FROM port_counters), (SELECT min(time) FROM link_events),
               (SELECT min(time) FROM oversubscription))
END
"""


@dataclass(frozen=True, slots=True)
class Outage:
    """One outage of one counted port: ``end`` None while it is still down."""

    switch: str
    port: str
    kind: str  # the link's kind (LinkKind value)
    start: datetime
    end: datetime | None

    def until(self, now: datetime) -> datetime:
        return self.end if self.end is not None else now


@dataclass(frozen=True, slots=True)
class Objective:
    """One SLO's state."""

    name: str
    description: str
    target: float
    window_days: float
    current: float
    budget_remaining: float
    burn_rates: dict[str, float] = field(default_factory=dict)
    status: str = "ok"  # ok | warning (slow burn) | critical (fast burn or budget spent)
    #: The history actually measured: the configured window, or less for a younger deployment.
    measured_days: float = 0.0
    #: ``page`` (fast burn on both of its windows), ``ticket`` (slow burn on both), or None.
    burn_alert: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "target": self.target,
            "window_days": self.window_days,
            "measured_days": self.measured_days,
            "current": self.current,
            "error_budget_remaining": self.budget_remaining,
            "burn_rates": self.burn_rates,
            "burn_alert": self.burn_alert,
            "status": self.status,
        }


def overlap_s(start: datetime, end: datetime, since: datetime, until: datetime) -> float:
    """Seconds of ``[start, end]`` inside ``[since, until]``."""
    return max(0.0, (min(end, until) - max(start, since)).total_seconds())


def covered_s(spans: Iterable[tuple[datetime, datetime]], since: datetime, until: datetime) -> float:
    """Seconds of ``[since, until]`` covered by the union of ``spans`` (overlaps count once)."""
    total = 0.0
    reach = since
    for start, end in sorted((max(s, since), min(e, until)) for s, e in spans):
        if end <= max(start, reach):
            continue  # outside the window, or already counted
        total += (end - max(start, reach)).total_seconds()
        reach = end
    return total


def down_seconds(outages: Iterable[Outage], since: datetime, until: datetime, now: datetime) -> float:
    """Link-seconds down in ``[since, until]``: per port the union of its outages, summed over ports."""
    per_port: dict[tuple[str, str], list[tuple[datetime, datetime]]] = defaultdict(list)
    for o in outages:
        per_port[(o.switch, o.port)].append((o.start, o.until(now)))
    return sum(covered_s(spans, since, until) for spans in per_port.values())


def burn_alert(burns: Mapping[str, float], fast: float, slow: float) -> str | None:
    """``page`` when both page windows burn faster than ``fast``, else ``ticket`` when both ticket
    windows burn faster than ``slow``, else None (:data:`BURN_ALERTS`)."""
    thresholds = {"page": fast, "ticket": slow}
    for alert, long, short in BURN_ALERTS:
        if burns.get(long, 0.0) > thresholds[alert] and burns.get(short, 0.0) > thresholds[alert]:
            return alert
    return None


def _counted_ports(fabric: Fabric) -> dict[tuple[str, str], str]:
    """Each physical link once, keyed by the port that reports it: (switch, port) → link kind."""
    out: dict[tuple[str, str], str] = {}
    for link in fabric.links:
        if link.kind is LinkKind.SERVER_LEAF:
            out[(link.b.node, link.b.port)] = str(link.kind)  # servers report nothing: the leaf end
        else:
            out[(link.a.node, link.a.port)] = str(link.kind)  # the lower tier's uplink end
    return out


async def history_start(conn: Connection, now: datetime, window: timedelta) -> datetime | None:
    """Where the measured history begins: the earliest stored data, never before ``now - window``."""
    start: datetime | None = await conn.fetchval(_HISTORY_SQL, now - window)
    return start


async def read_outages(conn: Connection, fabric: Fabric, since: datetime, now: datetime) -> list[Outage]:
    """Outages of counted ports that overlap ``[since, now]``: completed, and running at ``now``."""
    counted = _counted_ports(fabric)
    out: list[Outage] = []
    for r in await conn.fetch(_COMPLETED_SQL, since, now):
        if (kind := counted.get((r["switch"], r["port"]))) is not None:
            out.append(
                Outage(r["switch"], r["port"], kind, r["time"] - timedelta(seconds=float(r["down_s"])), r["time"])
            )
    for r in await conn.fetch(_OPEN_SQL, now):
        if (kind := counted.get((r["switch"], r["port"]))) is not None:
            out.append(Outage(r["switch"], r["port"], kind, r["since"], r["back_up"]))
    return out


async def evaluate_objectives(
    conn: Connection, fabric: Fabric, config: SloConfig, now: datetime, fatal_outage_s: float
) -> list[Objective]:
    """Both objectives over the measured history, with the burn rates of :data:`WINDOWS`."""
    links = max(1, len(fabric.links))
    window = timedelta(days=config.window_days)
    start = await history_start(conn, now, window)
    span_s = max(0.0, (now - max(start, now - window)).total_seconds()) if start is not None else 0.0
    since = now - timedelta(seconds=span_s)
    outages = await read_outages(conn, fabric, since, now) if span_s > 0 else []
    down = down_seconds(outages, since, now, now)
    avail = 1 - down / (links * span_s) if span_s > 0 else 1.0
    budget = 1 - config.link_availability
    burns: dict[str, float] = {}
    for label, seconds in WINDOWS.items():
        w = min(seconds, span_s)
        d = down_seconds(outages, now - timedelta(seconds=w), now, now) if w > 0 else 0.0
        burns[label] = (d / (links * w)) / budget if w > 0 else 0.0
    gpus = max(1, sum(1 for ln in fabric.links if ln.kind is LinkKind.SERVER_LEAF))
    fatal = sum(
        1
        for o in outages
        if o.kind == LinkKind.SERVER_LEAF
        and o.until(now) > since
        and (o.until(now) - o.start).total_seconds() > fatal_outage_s
    )
    per_month = fatal * (30.0 * 86400 / span_s) if span_s > 0 else 0.0
    a = max(0.0, 1 - per_month / gpus)
    measured_days = span_s / 86400
    return [
        _objective(
            "link_availability",
            "share of link-time the fabric's links were up",
            config.link_availability,
            config,
            avail,
            measured_days,
            burns,
        ),
        _objective(
            "gpu_network_availability",
            "monthly probability that a GPU's own link has no training-fatal outage",
            config.gpu_network_availability,
            config,
            a,
            measured_days,
            {},
        ),
    ]


def _objective(
    name: str,
    description: str,
    target: float,
    config: SloConfig,
    current: float,
    measured_days: float,
    burns: dict[str, float],
) -> Objective:
    budget = 1 - target
    remaining = 1 - (1 - current) / budget if budget > 0 else (1.0 if current >= target else -1.0)
    alert = burn_alert(burns, config.fast_burn, config.slow_burn)
    status = "critical" if remaining <= 0 or alert == "page" else "warning" if alert == "ticket" else "ok"
    return Objective(
        name,
        description,
        target,
        config.window_days,
        round(current, 8),
        round(remaining, 6),
        {k: round(v, 3) for k, v in burns.items()},
        status,
        round(measured_days, 6),
        alert,
    )


def job_interruption(gpu_availability: float, gpus: int, remaining_days: float) -> float:
    """P(a job on ``gpus`` GPUs is interrupted by the network in its remaining days): 1 - a^(N·months)."""
    if remaining_days <= 0:
        return 0.0
    return p_interrupt(max(gpu_availability, 1e-12), max(1, gpus), remaining_days / 30.0)
