"""Stability SLOs for long training runs: targets, error budgets and multi-window burn rates.

Two objectives, measured from the link events the collectors store:

* ``link_availability``: the share of link-time the fabric's links were up over the SLO window
  (each physical link counted once, from its lower-tier end; ongoing outages included).
* ``gpu_network_availability``: the monthly probability that a GPU's own network path (its NIC
  cable) suffers no training-fatal outage (longer than ``fatal_outage_s``). This is the ``a`` of
  FABRIC.md's ``1 - a^N``: with it, a job's interruption probability for its remaining days.

Error budget: ``1 - target`` of the window; ``budget_remaining`` is the unspent share (negative
when overspent). Burn rate over a short window: the bad fraction there divided by ``1 - target``
(1.0 spends the budget exactly over the SLO window; SRE practice pages on 14.4 over 1 h and
6 over 6 h, and those are the defaults of the ``fast``/``slow`` status rules).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from analyzer.config import SloConfig
from analyzer.slo import p_interrupt
from fabric.model import Fabric, LinkKind
from store.db import Connection

_DOWN_SQL = """
SELECT e.switch, e.port, coalesce(sum(e.down_s), 0) AS down_s,
       count(*) FILTER (WHERE e.down_s > $3) AS fatal
FROM link_events e
WHERE e.time > $1 AND e.time <= $2 AND e.new_status = 'up'
GROUP BY e.switch, e.port
"""
_OPEN_SQL = """
SELECT DISTINCT ON (switch, port) switch, port, new_status, time
FROM link_events WHERE time > $1 AND new_status IN ('up', 'down')
ORDER BY switch, port, time DESC
"""


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "target": self.target,
            "window_days": self.window_days,
            "current": self.current,
            "error_budget_remaining": self.budget_remaining,
            "burn_rates": self.burn_rates,
            "status": self.status,
        }


def _counted_ports(fabric: Fabric) -> dict[tuple[str, str], str]:
    """Each physical link once, keyed by the port that reports it: (switch, port) → link kind."""
    out: dict[tuple[str, str], str] = {}
    for link in fabric.links:
        if link.kind is LinkKind.SERVER_LEAF:
            out[(link.b.node, link.b.port)] = str(link.kind)  # servers report nothing: the leaf end
        else:
            out[(link.a.node, link.a.port)] = str(link.kind)  # the lower tier's uplink end
    return out


async def _down_seconds(
    conn: Connection, fabric: Fabric, since: datetime, until: datetime, fatal_s: float
) -> tuple[float, int, int]:
    """(down seconds, fatal outages on server links, fatal outages anywhere) between since and until."""
    counted = _counted_ports(fabric)
    down = 0.0
    fatal_server = fatal_all = 0
    for r in await conn.fetch(_DOWN_SQL, since, until, fatal_s):
        kind = counted.get((r["switch"], r["port"]))
        if kind is None:
            continue
        down += min(float(r["down_s"]), (until - since).total_seconds())
        fatal_all += int(r["fatal"])
        if kind == "server-leaf":
            fatal_server += int(r["fatal"])
    for r in await conn.fetch(_OPEN_SQL, since):
        if r["new_status"] == "down" and (r["switch"], r["port"]) in counted:
            down += (until - max(r["time"], since)).total_seconds()  # still down: count it so far
            fatal_all += 1 if (until - r["time"]).total_seconds() > fatal_s else 0
    return down, fatal_server, fatal_all


async def evaluate_objectives(
    conn: Connection, fabric: Fabric, config: SloConfig, now: datetime, fatal_outage_s: float
) -> list[Objective]:
    """Both objectives over the SLO window, with 1 h and 6 h burn rates."""
    links = max(1, len(fabric.links))
    window = timedelta(days=config.window_days)
    down, fatal_server, _ = await _down_seconds(conn, fabric, now - window, now, fatal_outage_s)
    avail = 1 - down / (links * window.total_seconds())
    burns: dict[str, float] = {}
    for label, hours in (("1h", 1), ("6h", 6)):
        w = timedelta(hours=hours)
        d, _, _ = await _down_seconds(conn, fabric, now - w, now, fatal_outage_s)
        burns[label] = (d / (links * w.total_seconds())) / (1 - config.link_availability)
    gpus = max(1, sum(1 for ln in fabric.links if ln.kind is LinkKind.SERVER_LEAF))
    per_month = fatal_server * (30.0 / config.window_days)
    a = max(0.0, 1 - per_month / gpus)
    return [
        _objective(
            "link_availability",
            "share of link-time the fabric's links were up",
            config.link_availability,
            config,
            avail,
            burns,
        ),
        _objective(
            "gpu_network_availability",
            "monthly probability that a GPU's own link has no training-fatal outage",
            config.gpu_network_availability,
            config,
            a,
            {},
        ),
    ]


def _objective(
    name: str, description: str, target: float, config: SloConfig, current: float, burns: dict[str, float]
) -> Objective:
    budget = 1 - target
    remaining = 1 - (1 - current) / budget if budget > 0 else (1.0 if current >= target else -1.0)
    status = "ok"
    if remaining <= 0 or burns.get("1h", 0) >= config.fast_burn:
        status = "critical"
    elif burns.get("6h", 0) >= config.slow_burn:
        status = "warning"
    return Objective(
        name,
        description,
        target,
        config.window_days,
        round(current, 8),
        round(remaining, 6),
        {k: round(v, 3) for k, v in burns.items()},
        status,
    )


def job_interruption(gpu_availability: float, gpus: int, remaining_days: float) -> float:
    """P(a job on ``gpus`` GPUs is interrupted by the network in its remaining days): 1 - a^(N·months)."""
    if remaining_days <= 0:
        return 0.0
    return p_interrupt(max(gpu_availability, 1e-12), max(1, gpus), remaining_days / 30.0)
