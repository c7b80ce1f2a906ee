"""PFC pause storms: how long ports are paused, and which port a pause tree grew from.

* **Pause ratio**: a pause frame with the maximum quanta stops the link for 65535 x 512 bit
  times (83.9 µs at 400G), so ``ratio = min(1, pps x 512 x 65535 / speed_bps)`` is the share of
  time a sender is held. Received pauses (``rx_pause_pps``) hold this port's own transmitter;
  sent pauses (``tx_pause_pps``) hold the peer's. The speed is the port's live speed in the
  window (a link degraded to 200G is held twice as long per frame), else its design speed.
* **Sustained**: per port, priority and direction, the run of samples at or above
  ``pfc_pause_ratio`` that ends with the port's latest sample in the window (a storm that
  stopped is over); its length is the sum of those samples' ``interval_s``, except the run's
  edges, which the storm may have filled only in part: the sample it began in (the run's first,
  when a quiet sample precedes it in the window; nothing while it is the only one) and the latest
  (it may have ended there). Each counts the share its rate bears to the full rate seen inside the
  run; a run with nothing inside counts the time its link was held (:func:`trailing_run`). PFC
  rows are stored on change, so a port's first row in the window whose interval begins inside
  the window follows a quiet reading nobody stored: that reading counts as the quiet sample it
  was. A run whose first row's interval reaches back past the window's start counts that
  interval in full; a long one (the first sample after a gap in the stream, over 1.5 sampling
  intervals) counts the time its link was held, never less than one interval, when its average
  rate was over the threshold (a burst is not a storm). A tree is a storm when one of its
  members has been paused for ``pfc_storm_min_s``. The window is
  ``ctx.window_s``, stretched to ``pfc_storm_min_s`` plus two sampling intervals when that is
  longer.
* **Priorities**: per-priority rows (0..7) when a port has them; the per-interface totals (-1,
  IEEE8021-PFC-MIB over SNMP) otherwise, and a total matches any priority when trees are joined.
* **The origin**: :func:`analyzer.pause_trees.pause_trees`.
* **Severity**: critical when the origin is held :data:`PFC_CRITICAL_FACTOR` times
  ``pfc_pause_ratio`` or more, or the storm spread to another switch (head-of-line blocking
  beyond one link stalls every flow through it); warning otherwise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from analyzer.context import CheckContext
from analyzer.findings import Finding
from analyzer.links import PortKey, human_s, links_scope, port_order
from analyzer.pause_trees import ALL_PRIORITIES, Direction, Pausing, Storm, pause_trees
from analyzer.snapshot import port_snapshot
from fabric.model import Endpoint, Fabric
from store.db import Connection

#: Bit times one maximum-quanta pause frame holds a link: 65535 quanta of 512 bit times.
PAUSE_QUANTA_BITS = 65535 * 512
#: The origin held this many times ``pfc_pause_ratio`` makes a storm critical.
PFC_CRITICAL_FACTOR = 5.0
#: The slowest port the SQL pre-filter allows for: pause rates below threshold even at this speed are skipped.
PREFILTER_SPEED_BPS = 10e9
#: Where each direction's pause rate sits in a sample ``(interval_s, tx_pps, rx_pps)``.
_DIRECTIONS: tuple[tuple[Direction, int], ...] = (("tx", 1), ("rx", 2))


def pause_ratio(pps: float | None, speed_bps: float | None) -> float:
    """Share of time ``pps`` maximum-quanta pause frames hold a ``speed_bps`` link (0..1)."""
    return min(1.0, pause_load(pps, speed_bps))


def pause_load(pps: float | None, speed_bps: float | None) -> float:
    """:func:`pause_ratio` before it is capped at 1: pauses refreshed before they expire still count."""
    if not pps or pps <= 0 or not speed_bps or speed_bps <= 0:
        return 0.0
    return pps * PAUSE_QUANTA_BITS / speed_bps


def trailing_run(
    samples: Sequence[tuple[float, float]], threshold: float, nominal_s: float | None = None
) -> tuple[float, float, float]:
    """``(seconds, peak, latest)`` ratio of the run at or above ``threshold`` ending with the last of
    ``samples`` (``(interval_s, ratio)`` in time order); ``(0, 0, latest)`` when the last is below.

    Only the samples inside a run are known to be paused all along. Its edges may be partial: the
    first, when a sample below ``threshold`` precedes it (the storm began somewhere in it), and the
    latest (the storm may have ended in it). Each edge counts ``interval x min(1, ratio / full)``,
    ``full`` being the highest ratio inside the run; a run with nothing inside (two samples) knows
    no full rate and vouches for the time its link was held (``full`` at least 1): a 1.6 s burst
    that two samples share is no 4 s storm, whichever way it split. A run reaching back to the
    first of ``samples`` counts its first in full, and a run of one sample counts its interval, or
    nothing when a quiet sample precedes it.

    A sample longer than 1.5 ``nominal_s`` (the first after a gap in the stream) vouches for no
    more than the time its link was held, ``interval x min(1, ratio)``, and never less than one
    nominal interval: its average says pauses came, not that they lasted (a 1.6 s burst read in
    a 13 s sample averages 12 %, over the 5 % threshold, and is no 13 s storm)."""
    start = len(samples)
    while start > 0 and 0 < samples[start - 1][1] >= threshold:
        start -= 1
    run = samples[start:]
    if not run:
        return 0.0, 0.0, samples[-1][1] if samples else 0.0
    if nominal_s is not None and nominal_s > 0:
        run = [(iv if iv <= 1.5 * nominal_s else max(nominal_s, iv * min(1.0, r)), r) for iv, r in run]
    peak, latest = max(ratio for _, ratio in run), run[-1][1]
    if len(run) == 1:
        return (0.0 if start > 0 else run[0][0]), peak, latest
    began_inside = start > 0
    inside = run[1:-1] if began_inside else run[:-1]
    full = max((r for _, r in inside), default=max(1.0, peak))
    edges = [run[0], run[-1]] if began_inside else [run[-1]]
    seconds = sum(interval for interval, _ in inside) + sum(iv * min(1.0, r / full) for iv, r in edges)
    return seconds, peak, latest


# --- the check ---------------------------------------------------------------------------------

_SQL = """
WITH cand AS (
    SELECT DISTINCT switch, port FROM pfc_counters
    WHERE time > $1 AND time <= $2
      AND (tx_pause_pps > 0 OR rx_pause_pps > 0)  -- the predicate of index pfc_counters_pausing
      AND (tx_pause_pps >= $3 OR rx_pause_pps >= $3)
)
SELECT c.time, c.switch, c.port, c.priority, c.interval_s, c.rx_pause_pps, c.tx_pause_pps, c.counter_reset
FROM pfc_counters c JOIN cand USING (switch, port)
WHERE c.time > $1 AND c.time <= $2
ORDER BY c.switch, c.port, c.priority, c.time
"""


def _speed(fabric: Fabric, switch: str, port: str, live: int | None) -> float:
    if live:
        return float(live)
    sw = fabric.switches.get(switch)
    info = next((p for p in fabric.ports(switch) if p.name == port), None) if sw is not None else None
    return (info.speed_gbps if info else sw.speed_gbps if sw else fabric.gpu_speed_gbps) * 1e9


def _after_quiet(time: datetime, interval_s: float, since: datetime) -> bool:
    """Whether the first row of a port in the window began its interval inside it (after
    ``since``): the reading it began at is not stored, so the pause counters stood still then (PFC
    rows are stored on change, collector/counters.py). A row's interval begins at the previous
    reading's instant exactly (to float4's rounding, the slack). Only the first row: after a row
    that paused, the collector always stores the next reading, so a hole later in the series is
    a row lost or a reading missed, not a quiet spell, and only shortens the run's sum."""
    return (time - since).total_seconds() - interval_s > 1e-3 + 1e-5 * interval_s


async def read_pausing(conn: Connection, ctx: CheckContext) -> list[Pausing]:
    """Every port, priority and direction paused at or above ``pfc_pause_ratio`` at its latest sample."""
    th = ctx.thresholds
    lookback = max(ctx.window_s, th.pfc_storm_min_s + 2 * ctx.collect_interval_s)
    floor = max(th.pfc_pause_ratio * PREFILTER_SPEED_BPS / PAUSE_QUANTA_BITS, 1e-9)
    since = ctx.now - timedelta(seconds=lookback)
    rows = await conn.fetch(_SQL, since, ctx.now, floor)
    series: dict[tuple[str, str, int], list[tuple[float, float | None, float | None]]] = defaultdict(list)
    for r in rows:
        key = (r["switch"], r["port"], r["priority"])
        ok = not r["counter_reset"] and r["interval_s"]
        if ok and key not in series and _after_quiet(r["time"], r["interval_s"], since):
            series[key].append((0.0, 0.0, 0.0))  # the quiet reading the collector did not store
        series[key].append(
            (r["interval_s"] or 0.0, r["tx_pause_pps"] if ok else None, r["rx_pause_pps"] if ok else None)
        )
    per_priority = {(s, p) for s, p, prio in series if prio != ALL_PRIORITIES}
    snap = await port_snapshot(conn, ctx) if series else {}
    out: list[Pausing] = []
    for (switch, port, prio), samples in series.items():
        if prio == ALL_PRIORITIES and (switch, port) in per_priority:
            continue  # the per-priority rows say it better
        now = snap.get((switch, port))
        speed = _speed(ctx.fabric, switch, port, now.speed_bps if now is not None else None)
        for direction, col in _DIRECTIONS:
            # uncapped, so that a partial first sample is prorated by its frames, not a saturated ratio
            run = [(iv, pause_load(smp[col], speed)) for smp in samples if (iv := smp[0]) is not None]
            seconds, peak, latest = trailing_run(run, th.pfc_pause_ratio, ctx.collect_interval_s)
            if peak > 0:  # paused now, if only since its latest sample
                pps = samples[-1][col] or 0.0
                out.append(
                    Pausing(switch, port, prio, direction, min(1.0, latest), min(1.0, peak), seconds, pps, latest)
                )
    return out


async def check_pfc_storms(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """One ``pfc_storm`` per sustained pause tree, keyed by the port it started from."""
    th, fabric = ctx.thresholds, ctx.fabric

    def peer(switch: str, port: str) -> PortKey | None:
        p = fabric.peer(Endpoint(switch, port))
        return (p.node, p.port) if p is not None and p.node in fabric.switches else None

    findings: list[Finding] = []
    for storm in pause_trees(await read_pausing(conn, ctx), peer):
        if max(m.sustained_s for m in storm.members) < th.pfc_storm_min_s:
            continue
        findings.append(_finding(ctx, storm))
    return findings


def _finding(ctx: CheckContext, storm: Storm) -> Finding:
    th, fabric, o = ctx.thresholds, ctx.fabric, storm.origin
    prio = "all" if o.priority == ALL_PRIORITIES else str(o.priority)
    switches = sorted({m.switch for m in storm.members})
    spread = {m.switch for m in storm.members if m.direction == "tx"} - {o.switch}
    ports = sorted({m.key for m in storm.members} | {o.key}, key=lambda k: (k[0], port_order(k[1])))
    others = len(ports) - 1
    lasted = max([o.sustained_s, *(m.sustained_s for m in storm.members)])  # what made it a storm
    far = fabric.peer(Endpoint(o.switch, o.port))
    if storm.kind == "sender":
        held = f"{far.node}:{far.port}" if far is not None else "its peer"
        head = f"PFC storm from {o.switch}:{o.port} (priority {prio}): it holds {held}"
    else:
        source = f"{far.node}:{far.port}" if far is not None else "an unmonitored device"
        head = f"PFC storm entering at {o.switch}:{o.port} from {source} (priority {prio}): paused"
    tail = f"; spread to {others} more ports on {len(switches)} switches" if others else ""
    critical = o.ratio >= min(1.0, PFC_CRITICAL_FACTOR * th.pfc_pause_ratio) or bool(spread)
    return Finding(
        rule="pfc_storm",
        key=f"{o.switch}:{o.port}:{prio}",
        severity="critical" if critical else "warning",
        summary=f"{head} {o.ratio:.0%} of the time for {human_s(lasted)}{tail}",
        scope=links_scope(fabric, ports),
        details={
            "origin": {
                **o.as_dict(),
                "kind": storm.kind,
                "peer": f"{far.node}:{far.port}" if far else None,
                "seen_at": sorted({f"{x.switch}:{x.port}" for x in storm.seen}),
            },
            "priority": o.priority,
            "pause_ratio": o.ratio,
            "sustained_s": lasted,
            "spread_to_switches": sorted(spread),
            "affected_ports": [f"{s}:{p}" for s, p in ports],
            "members": [m.as_dict() for m in storm.members],
            "other_origins": [x.as_dict() for x in storm.other_origins],
            "threshold": th.pfc_pause_ratio,
            "min_s": th.pfc_storm_min_s,
        },
        observed_at=ctx.now,
    )
