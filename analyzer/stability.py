"""Stability checks for long training runs: link flaps, outages, error rates and collection freshness.

Each check is ``async def check(conn, ctx) -> list[Finding]`` (see :mod:`analyzer.context`); SQL
aggregates the window per port, Python decides per link. ``check_flaps`` lives in
:mod:`analyzer.flaps`, ``check_outages`` in :mod:`analyzer.outages` (both exported here), PFC
storms in :mod:`analyzer.pfc`. Semantics, where the spec is silent:

* **A link is counted once** (:mod:`analyzer.links`): both ends report the same flap or outage; a
  link is named by its lower-tier switch end and takes the larger of its ends' figures, never
  their sum. Its GPUs are those of the naming end; both ends are in ``scope.ports``.
* **Flaps** (``link_flapping``): ``down`` transitions count 1 and ``flap`` rows (flaps only
  carrier-transitions or SNMP's ifLastChange saw) their ``flaps``, over the last ``flap_window_s``. ``flaps_per_window``
  or more: warning; three times that: critical.
* **Correlated flaps** (``switch_flapping``): when ``min(switch_flap_min_ports,
  ceil(switch_flap_port_share x cabled ports))`` (at least 2) ports of one switch flap within
  ``max(switch_flap_spread_s, collect_interval_s)`` of each other, counting events reported by
  either end of each link (a rebooting switch reports nothing; its peers do), those links are one
  finding for the switch instead of one each. A switch whose correlated links are all among
  another's is that other's victim (a leaf's parallel uplinks to a failing spine); the same cables
  flagged at both ends go to the end that reported none of their events (a switch that reports
  is up), else to the lower tier. Warning for a burst (it dropped many links at once, which kills
  jobs by itself), critical when one of its links flapped ``flaps_per_window`` times.
* **Outages** (``link_outage``): a cabled port whose latest sample in ``ctx.window_s`` is not up is
  down since the first non-up sample after its last up sample (robust to collector restarts, which
  record no transition); critical once that reaches ``fatal_outage_s``, a warning before. A link
  that is up again but had an outage of ``fatal_outage_s`` or more (``down_s`` of its up events)
  in the last ``flap_window_s`` is a warning until that outage leaves the window. Details carry
  the cumulative down time in that window (completed outages plus the running one; flaps only
  carrier-transitions saw have no known length). Outages of links in a correlated burst are one
  finding keyed by the switch. At 10 s sampling an outage the samples catch reads as at least one
  interval long: sampling cannot tell a 3 s blip from a 10 s outage.
* **Errors** (``error_rate``, per receiving port): over ``ctx.window_s``, time-weighted from the
  ingest-time ``*_ps`` rates, skipping samples flagged ``counter_reset`` (a reboot never yields an
  error rate). FCS errors (``in_fcs_errors_ps``; ``in_errors_ps`` where a source has no FCS
  counter) per hour at or above ``fcs_errors_per_hour`` with at least ``error_min_count`` errors
  in the window, or discards as a share of packets (``discards / (packets + discards)``, each
  direction) at or above ``discards_ratio``. Critical at :data:`ERROR_CRITICAL_FACTOR` times
  either threshold. A share needs a packet count: it is taken over the samples that have both
  discards and packets (``in_pps``/``out_pps``); a window where the source reports discards but
  no packet count has no share (``None``, not judged, never 100 %), and a finding on the port's
  FCS errors says so in ``details.discards_not_judged``. A *known* count of 0 packets with
  discards is a share of 1.0: the port discarded everything it got (a black hole), critical.
  Neither packets nor discards: no basis, ``None``.
* **Maintenance**: error samples inside a maintenance window on the port's link are not
  counted (:mod:`analyzer.coverage`): counters cleared, optics reseated during planned work.
* **Freshness** (``stale_switch``, critical): an inventory switch with no ``port_counters``
  sample in the last ``stale_intervals x collect_interval_s`` (or never), or whose latest
  reachability state is neither ``connected`` nor a ``connecting`` younger than that (start-up
  grace). Its blast radius is everything under it. A switch whose clock its collector measured
  behind ours (``switch_clocks``, within ``collector.max_clock_skew_s``: beyond it the collector
  corrects the timestamps) has that much added to its newest sample's time: a clock 20 s slow is
  not a silent switch. The clock row counts when its collector wrote it within two staleness
  windows of the round's time, on either side: the heartbeat rewrites the row every beat, and a
  beat that lands while a round runs must not take the switch's clock away from that round.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from analyzer.context import CheckContext
from analyzer.findings import Finding, blast_radius
from analyzer.flaps import check_flaps
from analyzer.links import clock, human_s, link_label, links_scope
from analyzer.outages import check_outages
from analyzer.round_data import Snapshot
from analyzer.snapshot import port_snapshot
from fabric.model import Endpoint
from store.db import Connection

__all__ = ["ERROR_CRITICAL_FACTOR", "check_errors", "check_flaps", "check_freshness", "check_outages"]

#: Critical when a rate is this many times its threshold (FCS errors, discards).
ERROR_CRITICAL_FACTOR = 10.0
#: How far back a stale switch's last sample is looked for when its first and last cabled ports have none.
LAST_SEEN_LOOKBACK = timedelta(hours=1)


# --- errors ------------------------------------------------------------------------------------


def error_figures(
    errors: float, err_s: float, in_disc: float, in_pkts: float | None, out_disc: float, out_pkts: float | None
) -> dict[str, float | None]:
    """FCS errors per hour and discard shares from window totals (None where there is no basis).

    ``in_pkts``/``out_pkts`` None: no packet count, so no share, however many discards.
    """

    def share(disc: float, pkts: float | None) -> float | None:
        return disc / (pkts + disc) if pkts is not None and pkts + disc > 0 else None

    return {
        "fcs_errors": errors,
        "fcs_errors_per_hour": errors / err_s * 3600.0 if err_s > 0 else None,
        "in_discards": in_disc,
        "in_packets": in_pkts,
        "in_discards_ratio": share(in_disc, in_pkts),
        "out_discards": out_disc,
        "out_packets": out_pkts,
        "out_discards_ratio": share(out_disc, out_pkts),
    }


def discards_not_judged(fig: dict[str, float | None]) -> dict[str, str]:
    """Directions with discards whose share is unknown for want of a packet count."""
    return {
        name: "no packet count"
        for name in ("in_discards", "out_discards")
        if (fig[name] or 0.0) > 0 and fig[f"{name.split('_')[0]}_packets"] is None
    }


def error_verdict(fig: dict[str, float | None], per_hour: float, ratio: float, min_count: int) -> list[str]:
    """What is over its threshold: ``"fcs"``, ``"in_discards"``, ``"out_discards"`` (with ``!`` when critical)."""
    over: list[str] = []
    rate, count = fig["fcs_errors_per_hour"], fig["fcs_errors"] or 0.0
    if rate is not None and count > 0 and count + 1e-6 >= min_count and rate >= per_hour:
        over.append("fcs!" if rate >= ERROR_CRITICAL_FACTOR * per_hour else "fcs")
    for name in ("in_discards", "out_discards"):
        r = fig[f"{name}_ratio"]
        if r is not None and r > 0 and r >= ratio:
            over.append(f"{name}!" if r >= ERROR_CRITICAL_FACTOR * ratio else name)
    return over


_ERRORS_SQL = """
WITH cand AS (
    SELECT DISTINCT switch, port FROM port_counters
    WHERE time > $1 AND time <= $2 AND NOT counter_reset
      AND (in_fcs_errors_ps > 0 OR in_errors_ps > 0 OR in_discards_ps > 0 OR out_discards_ps > 0)
      -- the predicate of index port_counters_faulty (migration 007): keep them in step
)
SELECT p.switch, p.port, max(p.time) AS last,
       sum(p.interval_s) FILTER (WHERE COALESCE(p.in_fcs_errors_ps, p.in_errors_ps) IS NOT NULL) AS err_s,
       sum(COALESCE(p.in_fcs_errors_ps, p.in_errors_ps) * p.interval_s) AS errors,
       -- a share's discards and packets come from the same samples; packets NULL: no count at all
       COALESCE(sum(p.in_discards_ps * p.interval_s) FILTER (WHERE p.in_pps IS NOT NULL),
                sum(p.in_discards_ps * p.interval_s)) AS in_disc,
       sum(p.in_pps * p.interval_s) FILTER (WHERE p.in_discards_ps IS NOT NULL) AS in_pkts,
       COALESCE(sum(p.out_discards_ps * p.interval_s) FILTER (WHERE p.out_pps IS NOT NULL),
                sum(p.out_discards_ps * p.interval_s)) AS out_disc,
       sum(p.out_pps * p.interval_s) FILTER (WHERE p.out_discards_ps IS NOT NULL) AS out_pkts
FROM port_counters p JOIN cand USING (switch, port)
WHERE p.time > $1 AND p.time <= $2 AND NOT p.counter_reset AND p.interval_s > 0
  -- not inside a maintenance window on the port's link (analyzer/coverage.py; usually none)
  AND NOT EXISTS (
      SELECT 1 FROM unnest($3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[]) AS m(switch, port, s, e)
      WHERE m.switch = p.switch AND (m.port IS NULL OR m.port = p.port) AND p.time >= m.s AND p.time < m.e)
GROUP BY p.switch, p.port
"""


async def check_errors(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``error_rate`` per port whose FCS error rate or discard share is over threshold in the window."""
    th, fabric = ctx.thresholds, ctx.fabric
    findings: list[Finding] = []
    cover = ctx.maintenance
    excluded = cover.exclusions() if cover is not None and cover else ([], [], [], [])
    for r in await conn.fetch(_ERRORS_SQL, ctx.since, ctx.now, *excluded):
        errors, err_s, in_disc, out_disc = (float(r[c] or 0.0) for c in ("errors", "err_s", "in_disc", "out_disc"))
        in_pkts, out_pkts = (None if r[c] is None else float(r[c]) for c in ("in_pkts", "out_pkts"))  # NULL: unknown
        fig = error_figures(errors, err_s, in_disc, in_pkts, out_disc, out_pkts)
        over = error_verdict(fig, th.fcs_errors_per_hour, th.discards_ratio, th.error_min_count)
        if not over:
            continue
        switch, port = r["switch"], r["port"]
        peer = fabric.peer(Endpoint(switch, port))
        what = []
        if {"fcs", "fcs!"} & set(over):
            rate = fig["fcs_errors_per_hour"] or 0.0
            what.append(f"receives {rate:,.0f} FCS errors/h (threshold {th.fcs_errors_per_hour:g}/h)")
        for name, verb in (("in_discards", "received"), ("out_discards", "sent")):
            if {name, f"{name}!"} & set(over):
                what.append(f"discards {fig[f'{name}_ratio'] or 0:.3%} of {verb} packets")
        frm = f" (from {peer.node}:{peer.port})" if peer is not None else ""
        findings.append(
            Finding(
                rule="error_rate",
                key=f"{switch}:{port}",
                severity="critical" if any(o.endswith("!") for o in over) else "warning",
                summary=f"{switch}:{port}{frm} " + " and ".join(what) + f" over the last {human_s(ctx.window_s)}",
                scope=links_scope(fabric, [(switch, port)]),
                details={
                    "link": link_label(fabric, switch, port),
                    **fig,
                    "over": sorted(o.rstrip("!") for o in over),
                    "discards_not_judged": discards_not_judged(fig),
                    "fcs_errors_per_hour_threshold": th.fcs_errors_per_hour,
                    "discards_ratio_threshold": th.discards_ratio,
                    "window_s": ctx.window_s,
                },
                observed_at=r["last"],
            )
        )
    return findings


# --- freshness ---------------------------------------------------------------------------------

_REACH_SQL = """
SELECT DISTINCT ON (switch) switch, time, state, detail FROM switch_reachability
WHERE time <= $1 ORDER BY switch, time DESC
"""
# Switches whose clock is behind ours by less than collector.max_clock_skew_s (beyond it the
# collector corrects their timestamps): their newest sample looks that much older than it is.
_SLOW_CLOCKS_SQL = """
SELECT switch, -skew_s AS behind_s FROM switch_clocks
WHERE NOT corrected AND skew_s < 0
  AND updated_at BETWEEN $1::timestamptz - make_interval(secs => $2::float8)
                     AND $1::timestamptz + make_interval(secs => $2::float8)
"""
_LAST_SEEN_SQL = """
SELECT k.switch, max(s.last) AS last
FROM unnest($1::text[], $2::text[]) AS k(switch, port)
CROSS JOIN LATERAL (
    SELECT max(p.time) AS last FROM port_counters p WHERE p.switch = k.switch AND p.port = k.port AND p.time <= $3
) s
GROUP BY k.switch
"""
_LAST_SEEN_ANY_SQL = """
SELECT switch, max(time) AS last FROM port_counters
WHERE switch = ANY($1::text[]) AND time > $2 AND time <= $3 GROUP BY switch
"""


async def _last_seen(conn: Connection, ctx: CheckContext, switches: list[str]) -> dict[str, datetime]:
    """Newest sample of each switch: probed through its first and last cabled ports (one index
    lookup each, however long ago), then any port over :data:`LAST_SEEN_LOOKBACK`."""
    keys = []
    for name in switches:
        cabled = [p.name for p in ctx.fabric.ports(name) if p.peer is not None]
        keys += [(name, port) for port in {cabled[0], cabled[-1]}] if cabled else []
    rows = await conn.fetch(_LAST_SEEN_SQL, [s for s, _ in keys], [p for _, p in keys], ctx.now) if keys else []
    seen = {r["switch"]: r["last"] for r in rows if r["last"] is not None}
    if rest := [s for s in switches if s not in seen]:
        rows = await conn.fetch(_LAST_SEEN_ANY_SQL, rest, ctx.now - LAST_SEEN_LOOKBACK, ctx.now)
        seen.update({r["switch"]: r["last"] for r in rows})
    return seen


def peer_view(ctx: CheckContext, snap: Snapshot, switch: str, fresh_since: datetime) -> dict[str, int]:
    """A silent switch's links as its peers see them: fresh samples of the far ends, up or down.

    A switch that stopped answering its collector may still forward (a management-plane fault)
    or be gone; only the other ends can tell.
    """
    up = down = unknown = 0
    for p in ctx.fabric.ports(switch):
        if p.peer is None or p.peer.node not in ctx.fabric.switches:
            continue
        far = snap.get((p.peer.node, p.peer.port))
        if far is None or far.last_time <= fresh_since or far.oper_up is None:
            unknown += 1
        elif far.oper_up:
            up += 1
        else:
            down += 1
    return {"peer_links_up": up, "peer_links_down": down, "peer_links_unknown": unknown}


async def check_freshness(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``stale_switch`` for inventory switches not heard from lately, or that the collector cannot reach."""
    stale_after = ctx.thresholds.stale_intervals * ctx.collect_interval_s
    fresh_since = ctx.now - timedelta(seconds=stale_after)
    seen: dict[str, datetime] = {}
    snap = await port_snapshot(conn, ctx)
    for (switch, _), p in snap.items():
        if switch not in seen or p.last_time > seen[switch]:
            seen[switch] = p.last_time
    missing = [s for s in ctx.fabric.switches if s not in seen or seen[s] <= fresh_since]
    for switch, t in (await _last_seen(conn, ctx, missing)).items() if missing else ():
        seen[switch] = max(t, seen.get(switch, t))
    reach = {r["switch"]: r for r in await conn.fetch(_REACH_SQL, ctx.now)}
    behind = {r["switch"]: r["behind_s"] for r in await conn.fetch(_SLOW_CLOCKS_SQL, ctx.now, 2 * stale_after)}
    findings: list[Finding] = []
    for switch in ctx.fabric.switches:
        last, state = seen.get(switch), reach.get(switch)
        silent = last is None or last + timedelta(seconds=behind.get(switch, 0.0)) <= fresh_since
        cut_off = (
            state is not None
            and state["state"] != "connected"
            and not (state["state"] == "connecting" and state["time"] > fresh_since)
        )
        if not (silent or cut_off):
            continue
        parts = []
        if last is None:
            parts.append("never heard from (no telemetry stored)")
        elif silent:
            parts.append(f"no telemetry for {human_s((ctx.now - last).total_seconds())} (last sample at {clock(last)})")
        if cut_off:
            assert state is not None
            detail = f": {state['detail']}" if state["detail"] else ""
            parts.append(f"collector state {state['state']} since {clock(state['time'])}{detail}")
        findings.append(
            Finding(
                rule="stale_switch",
                key=switch,
                severity="critical",
                summary=f"{switch}: " + "; ".join(parts),
                scope=blast_radius(ctx.fabric, switches=[switch]),
                details={
                    "last_seen": last.isoformat() if last is not None else None,
                    "age_s": (ctx.now - last).total_seconds() if last is not None else None,
                    "stale_after_s": stale_after,
                    "state": state["state"] if state is not None else None,
                    "state_since": state["time"].isoformat() if state is not None else None,
                    "state_detail": state["detail"] if state is not None else None,
                    **peer_view(ctx, snap, switch, fresh_since),
                },
                observed_at=last,
            )
        )
    return findings
