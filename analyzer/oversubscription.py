"""Oversubscription drift: every leaf and spine's live down:up capacity against its 1:1 design.

Live capacity counts cabled ports that are up, at their live speed. A downed uplink or one that
fell back to a lower speed raises the ratio; the fabric no longer keeps its non-blocking
promise, silently, for the servers under that switch. Ratios are kept as a series
(``oversubscription`` hypertable, written by the service) so one can see when drift began.

Roll-ups are **per tier**. A leaf↔spine link is a leaf's uplink and a spine's downlink: summing
leaves and spines together, a lost link takes as much from the down side as from the up side
and the roll-up stays at 1:1 however many links are lost. So each rail, group and the fabric is
summed per tier (sum of down over sum of up of its leaves, and of its spines): rows named
``<name>/leaf`` and ``<name>/spine`` under the scope ``rail``, ``group`` or ``fabric``
(``rail-3/leaf``, ``fabric/spine``; groups hold leaves only). The roll-up's own row (``rail-3``,
``group-1``, ``fabric``) is its worst tier's (highest drift against that tier's design), with
that tier's capacities, so down/up still gives its ratio. A tier's figure is an aggregate: one
leaf at 1.333 among 32 of a rail reads ~1.008 there; the worst single switches are the
report's ``worst``. Superspines (the top tier, no uplinks) are in no roll-up.

A switch with a cabled port missing from the window is skipped (and so absent from the
roll-ups): we never guess capacity. The ``ports_unreported`` finding
(:func:`analyzer.snapshot.check_unreported_ports`) names the missing ports, and
``stale_switch`` a switch silent altogether.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from analyzer.context import CheckContext
from analyzer.findings import Finding, Severity, blast_radius
from analyzer.round_data import Ratio, Snapshot
from analyzer.slo import efficiency_loss
from analyzer.snapshot import live_gbps, port_snapshot
from fabric.model import Fabric, Role
from store.db import Connection

#: Tiers in roll-up order (a tie in drift names the lower tier, where the servers are).
TIER_ORDER: dict[str, int] = {str(Role.LEAF): 0, str(Role.SPINE): 1}


def switch_ratios(fabric: Fabric, snap: Snapshot) -> list[Ratio]:
    """Live ratios of every leaf and spine whose cabled ports all reported in the window."""
    out: list[Ratio] = []
    for name, sw in sorted(fabric.switches.items()):
        if sw.role is Role.SUPERSPINE:
            continue  # the top tier has no uplinks
        down = up = 0.0
        lost: list[str] = []
        complete = True
        for p in fabric.ports(name):
            if p.peer is None:
                continue
            live = live_gbps(snap.get((name, p.name)))
            if live is None:
                complete = False
                break
            if p.direction == "down":
                down += live
            else:
                up += live
                if live < p.speed_gbps:
                    lost.append(p.name)
        if complete and (down or up):
            out.append(Ratio("switch", name, down, up, fabric.design_ratio(name), tuple(lost)))
    return out


def rollups(fabric: Fabric, ratios: Iterable[Ratio]) -> list[Ratio]:
    """Per rail, per group and fabric-wide: each tier's sums, and the worst tier as the roll-up's figure."""
    # (scope, name, tier) -> [live down, live up, design down, design up]
    acc: dict[tuple[str, str, str], list[float]] = {}
    for r in ratios:
        sw = fabric.switches[r.name]
        keys = [("fabric", "fabric")]
        if sw.rail is not None:
            keys.append(("rail", f"rail-{sw.rail}"))
        if sw.group is not None:
            keys.append(("group", f"group-{sw.group}"))
        design_down, design_up = fabric.capacity(r.name)
        for scope, name in keys:
            a = acc.setdefault((scope, name, str(sw.role)), [0.0, 0.0, 0.0, 0.0])
            a[0] += r.down_gbps
            a[1] += r.up_gbps
            a[2] += design_down
            a[3] += design_up
    tiers: dict[tuple[str, str], list[Ratio]] = {}
    for (scope, name, tier), (d, u, dd, du) in sorted(acc.items()):
        design = 1.0 if dd == du else dd / du if du > 0 else math.inf  # as Fabric.design_ratio
        tiers.setdefault((scope, name), []).append(Ratio(scope, f"{name}/{tier}", d, u, design))
    out: list[Ratio] = []
    for (scope, name), rows in tiers.items():
        worst = max(rows, key=lambda t: (t.drift, -TIER_ORDER.get(t.name.rsplit("/", 1)[1], 9)))
        out += [Ratio(scope, name, worst.down_gbps, worst.up_gbps, worst.design_ratio), *rows]
    return out


async def check_oversubscription(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """One finding per switch whose live ratio exceeds design by more than the tolerance."""
    snap = await port_snapshot(conn, ctx)
    ratios = switch_ratios(ctx.fabric, snap)
    ctx.results.ratios = [*ratios, *rollups(ctx.fabric, ratios)]
    t = ctx.thresholds
    per_gpu_gbyte_s = ctx.fabric.gpu_speed_gbps / 8
    findings: list[Finding] = []
    for r in ratios:
        if r.drift <= t.oversubscription_tolerance:
            continue
        ports = [(r.name, p) for p in r.uplinks_lost]
        live_share = 1 / r.ratio if r.ratio != float("inf") else 0.0
        loss = efficiency_loss(per_gpu_gbyte_s, per_gpu_gbyte_s * min(1.0, live_share))
        severity: Severity = "critical" if r.ratio / r.design_ratio >= t.oversubscription_critical else "warning"
        findings.append(
            Finding(
                rule="oversubscription_drift",
                key=r.name,
                severity=severity,
                summary=(
                    f"{r.name} runs {r.ratio:.3f}:1 against its {r.design_ratio:g}:1 design "
                    f"({r.down_gbps:g}G down, {r.up_gbps:g}G up; {len(r.uplinks_lost)} uplink(s) lost or slowed)"
                ),
                scope=blast_radius(ctx.fabric, switches=[r.name], ports=ports),
                details={
                    "ratio": round(r.ratio, 4),
                    "design_ratio": r.design_ratio,
                    "drift": round(r.drift, 4),
                    "down_gbps": r.down_gbps,
                    "up_gbps": r.up_gbps,
                    "uplinks_lost": list(r.uplinks_lost),
                    "efficiency_loss": round(loss, 4),
                },
                observed_at=ctx.now,
            )
        )
    return findings
