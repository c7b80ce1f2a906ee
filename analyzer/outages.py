"""Link outages: links down now, and training-fatal outages in the stability window.

``check_outages`` (exported by :mod:`analyzer.stability`, whose docstring states the semantics)
reads the latest oper status of every port from the evaluation's port snapshot, when the down
ports went down (the first non-up sample after their last up one, found through the
``(switch, port, time)`` key), and the ``down_s`` of the up events in the last ``flap_window_s``.

Outages of links that a correlated flap burst puts on one switch (:func:`analyzer.flaps.read_flaps`:
a reboot, a line card) are one finding for that switch, keyed by its name, instead of one per
link: a rebooting leaf is one alert, not 64.

A completed outage that began or ended inside a maintenance window on its link
(:mod:`analyzer.coverage`) is left out; a link down now is judged whatever its window said.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from analyzer.context import CheckContext
from analyzer.findings import SEVERITY_ORDER, Finding, Severity
from analyzer.flaps import read_flaps
from analyzer.links import PortKey, clock, human_s, link_end, link_label, links_scope
from analyzer.snapshot import port_snapshot
from fabric.model import Endpoint, Fabric
from store.db import Connection


@dataclass(slots=True)
class LinkOutages:
    """One link's outages in the stability window, per reporting end."""

    end: PortKey
    done: dict[PortKey, list[tuple[datetime, float]]] = field(default_factory=dict)  # (back up at, down_s)
    down_since: dict[PortKey, datetime] = field(default_factory=dict)  # ends down now

    def completed(self) -> list[tuple[datetime, float]]:
        """Outages that ended in the window, from the end that saw the most down time."""
        return max(self.done.values(), key=lambda xs: (sum(d for _, d in xs), len(xs)), default=[])

    def since(self) -> datetime | None:
        """When the link went down (the first end to see it), None when it is up."""
        return min(self.down_since.values(), default=None)


def tally_outages(
    fabric: Fabric, ups: list[tuple[str, str, datetime, float]], downs: dict[PortKey, datetime]
) -> dict[PortKey, LinkOutages]:
    """Per link: completed outages (``(switch, port, up time, down_s)``) and the ends down now."""
    links: dict[PortKey, LinkOutages] = {}
    for switch, port, t, down_s in ups:
        end = link_end(fabric, switch, port)
        lo = links.get(end) or links.setdefault(end, LinkOutages(end))
        lo.done.setdefault((switch, port), []).append((t, down_s))
    for (switch, port), since in downs.items():
        end = link_end(fabric, switch, port)
        lo = links.get(end) or links.setdefault(end, LinkOutages(end))
        lo.down_since[(switch, port)] = since
    return links


def outage_figures(
    lo: LinkOutages, now: datetime, window_start: datetime, seen_until: datetime | None = None
) -> dict[str, Any]:
    """Cumulative and longest down time in the window, and the running outage's length.

    The running outage counts up to ``seen_until``, the newest sample that saw the link down (not
    up to ``now``): a link is confirmed down only as long as samples say so, so one late or lone
    down sample (a blip, or the last thing a collector wrote before it froze) never reads as a
    training-fatal outage.
    """
    done = lo.completed()
    since = lo.since()
    until = now if seen_until is None else min(now, max(seen_until, since or seen_until))
    running = (until - since).total_seconds() if since is not None else None
    in_window = (now - max(since, window_start)).total_seconds() if since is not None else 0.0
    return {
        "down_now": since is not None,
        "down_since": since.isoformat() if since is not None else None,
        "down_for_s": running,
        "outages": len(done) + (since is not None),
        "cumulative_down_s": sum(d for _, d in done) + in_window,
        "longest_completed_s": max((d for _, d in done), default=0.0),
        "last_up_at": max(t for t, _ in done).isoformat() if done else None,
    }


def outage_severity(fig: dict[str, Any], fatal_s: float) -> Severity | None:
    """Down now: critical from ``fatal_s``, else warning; up again: warning if one outage reached ``fatal_s``."""
    if fig["down_now"]:
        return "critical" if fig["down_for_s"] >= fatal_s else "warning"
    return "warning" if fig["longest_completed_s"] >= fatal_s else None


_UPS_SQL = """
SELECT switch, port, time, down_s FROM link_events
WHERE time > $1 AND time <= $2 AND new_status = 'up' AND down_s IS NOT NULL
"""
_DOWN_SINCE_SQL = """
SELECT k.switch, k.port, (
    SELECT min(p.time) FROM port_counters p
    WHERE p.switch = k.switch AND p.port = k.port AND p.time <= $3 AND p.time > COALESCE((
        SELECT max(u.time) FROM port_counters u
        WHERE u.switch = k.switch AND u.port = k.port AND u.time <= $3 AND u.oper_status = 1
    ), '-infinity'::timestamptz)
) AS since
FROM unnest($1::text[], $2::text[]) AS k(switch, port)
"""

Verdict = tuple[PortKey, LinkOutages, dict[str, Any], Severity]


async def check_outages(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``link_outage`` for cabled links down now, or up again after a training-fatal outage."""
    fabric, th = ctx.fabric, ctx.thresholds
    snap = await port_snapshot(conn, ctx)
    down = [k for k, p in snap.items() if p.oper_up is False and fabric.peer(Endpoint(*k)) is not None]
    downs: dict[PortKey, datetime] = {}
    if down:
        rows = await conn.fetch(_DOWN_SINCE_SQL, [s for s, _ in down], [p for _, p in down], ctx.now)
        downs = {(r["switch"], r["port"]): r["since"] or snap[(r["switch"], r["port"])].last_time for r in rows}
    start = ctx.now - timedelta(seconds=th.flap_window_s)
    ups = [(r["switch"], r["port"], r["time"], r["down_s"]) for r in await conn.fetch(_UPS_SQL, start, ctx.now)]
    if (cover := ctx.maintenance) is not None and cover:  # a planned outage is not a fatal one afterwards
        ups = [u for u in ups if not cover.span_covered(u[0], u[1], u[2] - timedelta(seconds=u[3]), u[2])]
    verdicts: list[Verdict] = []
    for end, lo in sorted(tally_outages(fabric, ups, downs).items()):
        seen = [snap[e].last_time for e in lo.down_since if e in snap]
        fig = outage_figures(lo, ctx.now, start, max(seen) if seen else None)
        if (severity := outage_severity(fig, th.fatal_outage_s)) is not None:
            verdicts.append((end, lo, fig, severity))
    absorbed = (await read_flaps(conn, ctx)).absorbed(fabric) if verdicts else {}
    grouped: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        if (switch := absorbed.get(v[0])) is not None:
            grouped[switch].append(v)
    findings = [_switch_finding(ctx, switch, vs) for switch, vs in sorted(grouped.items()) if len(vs) > 1]
    alone = {v[0] for vs in grouped.values() if len(vs) > 1 for v in vs}
    findings += [_link_finding(ctx, *v) for v in verdicts if v[0] not in alone]
    return findings


def _link_finding(ctx: CheckContext, end: PortKey, lo: LinkOutages, fig: dict[str, Any], severity: Severity) -> Finding:
    th = ctx.thresholds
    label = link_label(ctx.fabric, *end)
    since = lo.since()
    if since is not None:
        summary = f"{label} down since {clock(since)}" + (
            f", for {human_s(fig['down_for_s'])}" if fig["down_for_s"] >= 1 else " (the latest sample)"
        )
    else:
        summary = (
            f"{label} was down {human_s(fig['longest_completed_s'])}, back up within the last "
            f"{human_s(th.flap_window_s)}: at least the {human_s(th.fatal_outage_s)} that stalls a training job"
        )
    return Finding(
        rule="link_outage",
        key=f"{end[0]}:{end[1]}",
        severity=severity,
        summary=summary,
        scope=links_scope(ctx.fabric, [end]),
        details={
            "link": label,
            **fig,
            "ends_down": sorted(f"{s}:{p}" for s, p in lo.down_since),
            "fatal_outage_s": th.fatal_outage_s,
            "window_s": th.flap_window_s,
        },
        observed_at=ctx.now if since is not None else max(t for t, _ in lo.completed()),
    )


def _switch_finding(ctx: CheckContext, switch: str, verdicts: list[Verdict]) -> Finding:
    th = ctx.thresholds
    severity = max((v[3] for v in verdicts), key=SEVERITY_ORDER.__getitem__)
    now_down = [v for v in verdicts if v[2]["down_now"]]
    n = len(verdicts)
    if now_down:
        longest = max(v[2]["down_for_s"] for v in now_down)
        summary = (
            f"{switch}: {len(now_down)} of {n} links that dropped together are down, the longest for "
            f"{human_s(longest)} (the switch or a line card)"
        )
    else:
        longest = max(v[2]["longest_completed_s"] for v in verdicts)
        summary = (
            f"{switch}: {n} links dropped together, up to {human_s(longest)} in the last "
            f"{human_s(th.flap_window_s)} (the switch or a line card); up again"
        )
    return Finding(
        rule="link_outage",
        key=switch,
        severity=severity,
        summary=summary,
        scope=links_scope(ctx.fabric, [v[0] for v in verdicts], [switch]),
        details={
            "switch": switch,
            "links": [{"link": link_label(ctx.fabric, *v[0]), **v[2]} for v in verdicts],
            "down_now": len(now_down),
            "cumulative_down_s": sum(v[2]["cumulative_down_s"] for v in verdicts),
            "fatal_outage_s": th.fatal_outage_s,
            "window_s": th.flap_window_s,
        },
        observed_at=ctx.now,
    )
