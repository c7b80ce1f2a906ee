"""Link flaps over the stability window, and correlated flaps that are one switch-level fault.

``check_flaps`` (exported by :mod:`analyzer.stability`, whose docstring states the semantics)
reads the ``down`` and ``flap`` rows of ``link_events`` in the last ``flap_window_s``: a few rows
even in a flap storm, so the work is in Python.

* ``link_flapping``: one finding per link (named by :func:`analyzer.links.link_end`) with its
  count, the larger of its two ends' counts (both see the same flaps).
* ``switch_flapping``: a flap event counts for the ports at *both* ends of its link, so a switch
  that drops its ports while it cannot report (reboot, dead line card) is still seen through its
  peers. When enough of one switch's ports (:func:`ports_needed`) flap within
  ``max(switch_flap_spread_s, collect_interval_s)`` of each other (event times are only as fine
  as the sampling), those links become one finding for the switch instead of one per link. A
  switch whose correlated links are all among another's is that one's victim (a leaf's parallel
  uplinks to a failing spine); the same cables flagged at both ends go to the end that reported
  none of their events (a switch that reports is up), else to the lower tier.

Events inside a maintenance window on their link (:mod:`analyzer.coverage`) are left out.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from analyzer.context import CheckContext
from analyzer.findings import Finding, Severity
from analyzer.links import PortKey, clock, human_s, link_end, link_label, links_scope, port_order, switch_ends
from analyzer.round_data import FlapEvent, FlapWindow, LinkFlaps
from fabric.model import TIER, Fabric
from store.db import Connection

#: A link flapping this many times ``flaps_per_window`` is critical.
FLAP_CRITICAL_FACTOR = 3


def tally_flaps(fabric: Fabric, events: Iterable[FlapEvent]) -> dict[PortKey, LinkFlaps]:
    """Flaps per link, keyed by the link's naming end."""
    links: dict[PortKey, LinkFlaps] = {}
    for switch, port, t, n in events:
        end = link_end(fabric, switch, port)
        lf = links.get(end) or links.setdefault(end, LinkFlaps(end))
        lf.by_end[(switch, port)] += n
        if lf.last is None or t > lf.last:
            lf.last = t
    return links


def flap_severity(count: int, per_window: int) -> Severity | None:
    """None below ``per_window`` flaps, warning from it, critical from :data:`FLAP_CRITICAL_FACTOR` times it."""
    if count >= FLAP_CRITICAL_FACTOR * per_window:
        return "critical"
    return "warning" if count >= per_window else None


def ports_needed(cabled: int, min_ports: int, share: float) -> int:
    """Ports of one switch that must flap together to blame the switch: ``min_ports``, or
    ``share`` of its cabled ports when that is fewer, never fewer than 2."""
    return max(2, min(min_ports, math.ceil(share * cabled)))


def correlated_ports(times: Mapping[str, Sequence[float]], spread_s: float, needed: int) -> set[str]:
    """Ports that flapped within ``spread_s`` of at least ``needed - 1`` other distinct ports."""
    events = sorted((t, p) for p, ts in times.items() for t in ts)
    inside: Counter[str] = Counter()
    found: set[str] = set()
    lo = 0
    for t, port in events:
        inside[port] += 1
        while events[lo][0] < t - spread_s:
            old = events[lo][1]
            inside[old] -= 1
            if not inside[old]:
                del inside[old]
            lo += 1
        if len(inside) >= needed:
            found.update(inside)
    return found


def switch_bursts(
    fabric: Fabric, events: Iterable[FlapEvent], spread_s: float, min_ports: int, share: float
) -> dict[str, set[str]]:
    """Per switch, the ports that flapped together; an event counts at both ends of its link.

    A switch whose correlated links are all among another's (a leaf's parallel uplinks to a spine
    that dropped many ports) is left out: the other switch explains them. When two switches flag
    exactly the same cables (a bundle of parallel links), the one that reported none of those
    events keeps them: a switch that reports its ports going down is up (a rebooting spine seen
    first from its one leaf, a rebooting leaf from its one spine); when both or neither reported,
    the lower tier keeps them.
    """
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    reported: dict[str, set[str]] = defaultdict(set)  # switch -> its own ports it reported
    for switch, port, t, _ in events:
        reported[switch].add(port)
        for s, p in switch_ends(fabric, switch, port):
            times[s][p].append(t.timestamp())
    out: dict[str, set[str]] = {}
    for switch, by_port in times.items():
        cabled = sum(p.peer is not None for p in fabric.ports(switch)) if switch in fabric.switches else 0
        needed = ports_needed(cabled, min_ports, share)
        if len(by_port) >= needed and (ports := correlated_ports(by_port, spread_s, needed)):
            out[switch] = ports
    # A leaf whose flapping uplinks all go to one flapping spine (parallel links) is the spine's victim;
    # when both ends flagged the very same cables, the silent end, else the lower tier, takes them
    # (one finding, not two).
    links = {s: {link_end(fabric, s, p) for p in ports} for s, ports in out.items()}

    def rank(name: str) -> tuple[int, str]:
        sw = fabric.switches.get(name)
        return (TIER[sw.role] if sw is not None else 0, name)

    def silent(name: str) -> bool:
        return not reported[name] & out[name]

    def explained(s: str, t: str) -> bool:
        if links[s] != links[t]:
            return links[s] < links[t]
        if silent(s) != silent(t):
            return silent(t)  # the one that reported them is up: the silent one explains them
        return rank(t) < rank(s)

    return {s: ports for s, ports in out.items() if not any(explained(s, t) for t in links if t != s)}


_SQL = """
SELECT switch, port, time, flaps AS n
FROM link_events
WHERE time > $1 AND time <= $2 AND new_status IN ('down', 'flap')
"""


async def read_flaps(conn: Connection, ctx: CheckContext) -> FlapWindow:
    """The window's flap events, tallied and correlated (memoized for the evaluation: outages use it too)."""
    if ctx.results.flaps is not None:
        return ctx.results.flaps
    th = ctx.thresholds
    rows = await conn.fetch(_SQL, ctx.now - timedelta(seconds=th.flap_window_s), ctx.now)
    events: list[FlapEvent] = [(r["switch"], r["port"], r["time"], int(r["n"])) for r in rows]
    if (cover := ctx.maintenance) is not None and cover:  # a planned reboot's transitions are no flaps
        events = [e for e in events if not cover.event_covered(e[0], e[1], e[2])]
    spread = max(th.switch_flap_spread_s, ctx.collect_interval_s)
    bursts = switch_bursts(ctx.fabric, events, spread, th.switch_flap_min_ports, th.switch_flap_port_share)
    window = FlapWindow(events, tally_flaps(ctx.fabric, events), bursts, spread)
    ctx.results.flaps = window
    return window


async def check_flaps(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``link_flapping`` per flapping link and ``switch_flapping`` per correlated burst, over ``flap_window_s``."""
    w = await read_flaps(conn, ctx)
    findings = [_switch_finding(ctx, switch, ports, w.links, w.spread_s) for switch, ports in sorted(w.bursts.items())]
    absorbed = w.absorbed(ctx.fabric)
    for end, lf in sorted(w.links.items()):
        severity = flap_severity(lf.count, ctx.thresholds.flaps_per_window)
        if end not in absorbed and severity is not None and lf.last is not None:
            findings.append(_link_finding(ctx, lf, severity, lf.last))
    return findings


def _link_finding(ctx: CheckContext, lf: LinkFlaps, severity: Severity, last: datetime) -> Finding:
    window = ctx.thresholds.flap_window_s
    label = link_label(ctx.fabric, *lf.end)
    return Finding(
        rule="link_flapping",
        key=f"{lf.end[0]}:{lf.end[1]}",
        severity=severity,
        summary=f"{label} flapped {lf.count} times in {human_s(window)} (last at {clock(last)})",
        scope=links_scope(ctx.fabric, [lf.end]),
        details={
            "link": label,
            "flaps": lf.count,
            "by_end": {f"{s}:{p}": n for (s, p), n in sorted(lf.by_end.items())},
            "last_flap": last.isoformat(),
            "window_s": window,
            "threshold": ctx.thresholds.flaps_per_window,
        },
        observed_at=last,
    )


def _switch_finding(
    ctx: CheckContext, switch: str, ports: set[str], links: dict[PortKey, LinkFlaps], spread: float
) -> Finding:
    th, fabric = ctx.thresholds, ctx.fabric
    mine = sorted({link_end(fabric, switch, p) for p in ports})
    worst = max(links[e].count for e in mine)
    last = max(t for e in mine if (t := links[e].last) is not None)
    ordered = sorted(ports, key=port_order)
    return Finding(
        rule="switch_flapping",
        key=switch,
        severity="critical" if worst >= th.flaps_per_window else "warning",
        summary=f"{switch}: {len(ports)} ports went down together within {human_s(spread)} "
        f"(the switch or a line card, not {len(ports)} cables), "
        + ("once each" if worst == 1 else f"up to {worst} times per link")
        + f" in {human_s(th.flap_window_s)}, last at {clock(last)}",
        scope=links_scope(fabric, [(switch, p) for p in ordered], [switch]),
        details={
            "ports": ordered,
            "port_count": len(ports),
            "links": [link_label(fabric, *e) for e in mine],
            "max_link_flaps": worst,
            "total_flaps": sum(links[e].count for e in mine),
            "last_flap": last.isoformat(),
            "spread_s": spread,
            "window_s": th.flap_window_s,
        },
        observed_at=last,
    )
