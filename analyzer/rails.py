"""Rail symmetry: every rail must offer the same capacity and carry the same load.

A collective runs at the pace of its slowest rail, so one degraded rail slows every job that
crosses it. Three checks share the port snapshot:

* **Capacity.** A rail's usable uplink capacity is its *bottleneck* switch's: the lowest
  live/design uplink fraction among the rail's leaves and spines (the servers under that leaf
  get that much less bandwidth on the rail). Below design by more than the tolerance →
  ``rail_capacity_asymmetry``, with the gap to the best rail and the training-efficiency loss
  the FABRIC.md model predicts for the GPUs under the bottleneck. An uplink with no sample in
  the snapshot counts at its design speed (a figure, not a guess of a fault): the finding lists
  such uplinks of the rail (``unreported_ports``), and ``ports_unreported``
  (:func:`analyzer.snapshot.check_unreported_ports`) reports them.
* **Load.** While traffic flows, each rail's throughput toward its GPUs (leaf down-ports, in +
  out) is compared with the median rail; one well below is a straggler (``rail_load_straggler``).
* **ECMP balance.** The spread of tx rates over a switch's live uplinks (coefficient of
  variation, as Juniper Apstra's ECMP-imbalance probe uses standard deviation) →
  ``ecmp_imbalance``.
"""

from __future__ import annotations

import math
import statistics
from datetime import timedelta

from analyzer.context import CheckContext
from analyzer.findings import Finding, blast_radius
from analyzer.round_data import RailCapacity, Snapshot
from analyzer.slo import efficiency_loss
from analyzer.snapshot import SNAPSHOT_INTERVALS, live_gbps, mean_rates, port_snapshot
from fabric.model import Fabric, Role
from store.db import Connection

#: Uplinks carrying less than this (bit/s) on average are idle: no ECMP verdict on them.
ECMP_MIN_BPS = 1e9


def rail_capacities(fabric: Fabric, snap: Snapshot) -> list[RailCapacity]:
    """Per rail: summed live and design uplink capacity, and the bottleneck switch."""
    per_rail: dict[int, list[tuple[str, float, float, list[tuple[str, str]], list[tuple[str, str]]]]] = {}
    for name, sw in fabric.switches.items():
        if sw.rail is None or sw.role is Role.SUPERSPINE:
            continue
        live = design = 0.0
        lost: list[tuple[str, str]] = []
        unknown: list[tuple[str, str]] = []
        for p in fabric.ports(name):
            if p.peer is None or p.direction != "up":
                continue
            cap = live_gbps(snap.get((name, p.name)))
            design += p.speed_gbps
            live += p.speed_gbps if cap is None else cap  # unknown: ports_unreported speaks for it
            if cap is not None and cap < p.speed_gbps:
                lost.append((name, p.name))
            elif (name, p.name) not in snap:
                unknown.append((name, p.name))
        if design > 0:
            per_rail.setdefault(sw.rail, []).append((name, live, design, lost, unknown))
    out: list[RailCapacity] = []
    for rail, switches in sorted(per_rail.items()):
        worst = min(switches, key=lambda s: (s[1] / s[2], s[0]))
        out.append(
            RailCapacity(
                rail=rail,
                live_gbps=sum(s[1] for s in switches),
                design_gbps=sum(s[2] for s in switches),
                bottleneck=worst[0] if worst[1] < worst[2] else None,
                bottleneck_fraction=worst[1] / worst[2],
                lost_ports=tuple(p for s in switches for p in s[3]),
                unreported_ports=tuple(p for s in switches for p in s[4]),
            )
        )
    return out


async def check_rail_capacity(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``rail_capacity_asymmetry`` for each rail whose bottleneck is below design."""
    caps = rail_capacities(ctx.fabric, await port_snapshot(conn, ctx))
    ctx.results.rail_capacity = caps
    if not caps:
        return []
    best = max(c.bottleneck_fraction for c in caps)
    per_gpu = ctx.fabric.gpu_speed_gbps / 8
    findings: list[Finding] = []
    for c in caps:
        if c.bottleneck_fraction >= 1 - ctx.thresholds.rail_capacity_asymmetry or c.bottleneck is None:
            continue
        loss = efficiency_loss(per_gpu, per_gpu * c.bottleneck_fraction)
        gap = best - c.bottleneck_fraction
        findings.append(
            Finding(
                rule="rail_capacity_asymmetry",
                key=f"rail-{c.rail}",
                severity="critical" if c.bottleneck_fraction < 0.75 else "warning",
                summary=(
                    f"rail {c.rail} is down to {c.bottleneck_fraction:.1%} of its design uplink capacity at "
                    f"{c.bottleneck} ({gap:.1%} below the best rail): collectives crossing it slow down"
                ),
                scope=blast_radius(ctx.fabric, switches=[c.bottleneck], ports=list(c.lost_ports)),
                details={
                    "rail": c.rail,
                    "live_gbps": c.live_gbps,
                    "design_gbps": c.design_gbps,
                    "bottleneck": c.bottleneck,
                    "bottleneck_fraction": round(c.bottleneck_fraction, 4),
                    "best_rail_fraction": round(best, 4),
                    "asymmetry": round(gap, 4),
                    "lost_ports": [f"{s}:{p}" for s, p in c.lost_ports],
                    "unreported_ports": [f"{s}:{p}" for s, p in c.unreported_ports],
                    "efficiency_loss": round(loss, 4),
                },
                observed_at=ctx.now,
            )
        )
    return findings


def rail_loads(fabric: Fabric, snap: Snapshot) -> dict[int, float]:
    """Per rail: traffic to and from its GPUs (leaf down-ports, in + out), Gbit/s.

    A rail with a cabled GPU-facing port missing from the window, or up without a rate yet (a
    collector's first sample after it started), is left out: its load is unknown, not zero, and
    a straggler is never read from a silence.
    """
    loads: dict[int, float] = {}
    unknown: set[int] = set()
    for name, sw in fabric.switches.items():
        if sw.role is not Role.LEAF or sw.rail is None:
            continue
        total = loads.get(sw.rail, 0.0)
        for p in fabric.ports(name):
            if p.peer is None or p.direction != "down":
                continue
            now = snap.get((name, p.name))
            if now is None or (now.oper_up is not False and now.in_bps is None and now.out_bps is None):
                unknown.add(sw.rail)
                continue
            total += ((now.in_bps or 0.0) + (now.out_bps or 0.0)) / 1e9
        loads[sw.rail] = total
    return {rail: load for rail, load in loads.items() if rail not in unknown}


def stragglers(loads: dict[int, float], min_gbps: float, shortfall: float) -> tuple[dict[int, float], float]:
    """The rails carrying ``shortfall`` less than the median rail (rail -> load) and that median;
    none while fewer than two rails are known or the median is under ``min_gbps``."""
    if len(loads) < 2 or min(loads.values()) < 0:
        return {}, 0.0
    median = statistics.median(loads.values())
    if median < min_gbps:
        return {}, median
    floor = median * (1 - shortfall)
    return {rail: load for rail, load in sorted(loads.items()) if load < floor}, median


async def _window_loads(conn: Connection, ctx: CheckContext, window_s: float) -> dict[int, float]:
    leaves = [name for name, sw in ctx.fabric.switches.items() if sw.role is Role.LEAF and sw.rail is not None]
    return rail_loads(ctx.fabric, await mean_rates(conn, leaves, ctx.now - timedelta(seconds=window_s), ctx.now))


async def check_rail_load(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``rail_load_straggler`` for a rail well below the median rail while traffic flows.

    Loads are mean rates over ``rail_load_window_s`` (12 s), or over the snapshot's 1.5 sampling
    intervals when those are longer (10 s sampling: 15 s). A training step is a burst of
    communication then computing, seconds each, and every switch samples at its own phase: at
    1-2 s sampling a rail's last sample says where in the step it fell, and a rail sampled in
    the computing part read as a straggler with no fault (issue 11's note; the demo once). Over
    three or more steps the phases even out."""
    t = ctx.thresholds
    if t.rail_load_window_s > SNAPSHOT_INTERVALS * ctx.collect_interval_s:
        loads = await _window_loads(conn, ctx, t.rail_load_window_s)
    else:
        loads = rail_loads(ctx.fabric, await port_snapshot(conn, ctx))
    ctx.results.rail_load = loads
    low, median = stragglers(loads, t.rail_load_min_gbps, t.rail_load_straggler)
    findings: list[Finding] = []
    for rail, load in low.items():
        leaves = [n for n, s in ctx.fabric.switches.items() if s.role is Role.LEAF and s.rail == rail]
        findings.append(
            Finding(
                rule="rail_load_straggler",
                key=f"rail-{rail}",
                severity="warning",
                summary=f"rail {rail} carries {load:.0f} Gbit/s against a median rail's {median:.0f}: a straggler",
                scope=blast_radius(ctx.fabric, switches=leaves),
                details={
                    "rail": rail,
                    "load_gbps": round(load, 1),
                    "median_gbps": round(median, 1),
                    "shortfall": round(1 - load / median, 4),
                },
                observed_at=ctx.now,
            )
        )
    return findings


async def check_ecmp(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``ecmp_imbalance`` where a switch's live uplinks carry very different tx rates."""
    snap = await port_snapshot(conn, ctx)
    findings: list[Finding] = []
    for name, sw in sorted(ctx.fabric.switches.items()):
        if sw.role is Role.SUPERSPINE:
            continue
        rates: list[tuple[str, float]] = []
        for p in ctx.fabric.ports(name):
            now = snap.get((name, p.name))
            if p.peer is None or p.direction != "up" or now is None or not now.oper_up or now.out_bps is None:
                continue
            rates.append((p.name, now.out_bps))
        if len(rates) < 2:
            continue
        values = [r for _, r in rates]
        mean = statistics.fmean(values)
        if mean < ECMP_MIN_BPS:
            continue
        cv = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values)) / mean
        if cv <= ctx.thresholds.ecmp_imbalance_cv:
            continue
        low = min(rates, key=lambda r: r[1])
        high = max(rates, key=lambda r: r[1])
        findings.append(
            Finding(
                rule="ecmp_imbalance",
                key=name,
                severity="warning",
                summary=(
                    f"{name}'s {len(rates)} uplinks are unevenly loaded (CV {cv:.2f}): "
                    f"{low[0]} {low[1] / 1e9:.0f}G vs {high[0]} {high[1] / 1e9:.0f}G"
                ),
                scope=blast_radius(ctx.fabric, switches=[name]),
                details={
                    "cv": round(cv, 4),
                    "mean_gbps": round(mean / 1e9, 2),
                    "min": {"port": low[0], "gbps": round(low[1] / 1e9, 2)},
                    "max": {"port": high[0], "gbps": round(high[1] / 1e9, 2)},
                },
                observed_at=ctx.now,
            )
        )
    return findings
