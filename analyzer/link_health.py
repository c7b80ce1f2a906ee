"""Link health (issue 26, SPEC §10.5): warn before a link fails, from its optics and FEC.

For every port with transceiver or FEC data in the last ``thresholds.link_window_s`` (hours,
not samples), :func:`link_health` fits robust trends (:mod:`analyzer.link_trend`) of

* rx power (dBm) against the module's own low CRITICAL threshold, or
  ``thresholds.rx_low_critical_dbm`` when the module reports none;
* laser bias (mA) against the module's high CRITICAL threshold, or
  ``thresholds.bias_high_critical_ma``;
* log10 of the pre-FEC BER against ``thresholds.pre_fec_ber_critical`` (modules have no BER
  threshold; the default is where RS(544,514) stops correcting);

and, where the device has FEC bins (SONiC, Cumulus), the predicted post-FEC frame loss ratio
of the last ``thresholds.link_flr_window_s`` (evidence only: a burst raises it and recovers).
Each trend gives a time to its threshold with a confidence; the earliest among those at least
``thresholds.link_min_confidence`` sure is the port's ``time_to_failure_s`` (None: no trend). A
step (a dirty connector: a loss, then stable) never reaches that confidence: at most half of the
pairwise slopes cross a step, and a flat line has no time to threshold.

:func:`check_link_health` (rule ``link_degrading``, keyed by the link's naming end, the worst end
of the link) reports a link whose time to failure is within ``thresholds.link_horizon_s``;
:mod:`analyzer.actions` turns one within ``alerts.checkpoint_lead_s`` into a ``checkpoint``. A
port with no transceiver data is not a finding: nothing is guessed.

Each trend is fitted at two scales, the whole window in 60 buckets and its last third in 30 (a
fast degradation shows in the recent one hours before it fills the window); the earliest
confident estimate wins. Series are averaged per bucket (the points' mean time) in SQL, so a
port sends at most 90 points whatever the DOM interval. The analyzer service runs the check once
per ``analyzer.link_health_interval_s`` (60 s, the DOM interval), beside its rounds, and reuses
its findings in the rounds between (analyzer/cadence.py). Before each fit it rolls the closed
buckets of the window (store/link_rollup.py): the summary pass reads ~36 rollup rows per port and
table instead of ~360 rows (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from analyzer.config import ThresholdsConfig
from analyzer.context import CheckContext
from analyzer.findings import Finding, blast_radius
from analyzer.link_summary import summaries
from analyzer.link_trend import BINS, Trend, least_squares, predicted_flr, time_to_threshold, trend
from analyzer.links import link_end
from fabric.model import Endpoint, Fabric
from store.db import Connection
from store.records import from_int8

_BUCKETS = 60
#: The recent scale: the last third of the window, in 30 buckets (a trend is fully trusted from 30).
SHORT = 3
_SHORT_BUCKETS = 30

_DOM_SQL = """
SELECT switch, port, time_bucket(make_interval(secs => $3), time) AS b,
       avg(extract(epoch FROM time)) AS t, avg(rx_power_dbm) AS rx, avg(laser_bias_ma) AS bias,
       last(rx_low_warning_dbm, time) AS rx_warn, last(rx_low_critical_dbm, time) AS rx_crit,
       last(bias_high_critical_ma, time) AS bias_crit
FROM transceiver_dom d JOIN unnest($4::text[], $5::text[]) AS k(sw, pt) ON d.switch = k.sw AND d.port = k.pt
WHERE time > $1 AND time <= $2
GROUP BY switch, port, 3
ORDER BY switch, port, 3
"""

_BER_SQL = """
SELECT switch, port, time_bucket(make_interval(secs => $3), time) AS b,
       avg(extract(epoch FROM time)) AS t, avg(log(pre_fec_ber)) AS log_ber
FROM port_fec f JOIN unnest($4::text[], $5::text[]) AS k(sw, pt) ON f.switch = k.sw AND f.port = k.pt
WHERE time > $1 AND time <= $2 AND pre_fec_ber > 0
GROUP BY switch, port, 3
ORDER BY switch, port, 3
"""

_BINS_SQL = """
SELECT switch, port, first(bins, time) AS first_bins, last(bins, time) AS last_bins,
       last(pre_fec_ber, time) AS pre_fec_ber
FROM port_fec
WHERE time > $1 AND time <= $2
GROUP BY switch, port
"""


@dataclass(frozen=True, slots=True)
class LinkLimits:
    """The configured limits (``analyzer.thresholds``) link health falls back on or uses."""

    window_s: float = 6 * 3600.0
    flr_window_s: float = 600.0
    horizon_s: float = 24 * 3600.0
    min_confidence: float = 0.6
    rx_low_critical_dbm: float = -10.0
    bias_high_critical_ma: float = 13.0
    pre_fec_ber_critical: float = 2.4e-4

    @classmethod
    def of(cls, t: ThresholdsConfig) -> LinkLimits:
        """From ``analyzer.thresholds`` (its ``link_*`` and optics fields)."""
        return cls(
            t.link_window_s,
            t.link_flr_window_s,
            t.link_horizon_s,
            t.link_min_confidence,
            t.rx_low_critical_dbm,
            t.bias_high_critical_ma,
            t.pre_fec_ber_critical,
        )


@dataclass(slots=True)
class PortHealth:
    """One port's link health: the estimate and the evidence behind it."""

    switch: str
    port: str
    time_to_failure_s: float | None = None
    confidence: float = 0.0
    basis: str | None = None  # which series gives the estimate: rx_power, laser_bias, pre_fec_ber
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Series:
    """One port's DOM and BER points in the window (seconds, value), and its module's thresholds."""

    rx: list[float] = field(default_factory=list)
    rx_ts: list[float] = field(default_factory=list)
    bias: list[float] = field(default_factory=list)
    bias_ts: list[float] = field(default_factory=list)
    ber_ts: list[float] = field(default_factory=list)
    log_ber: list[float] = field(default_factory=list)
    rx_warn: float | None = None
    rx_crit: float | None = None
    bias_crit: float | None = None


async def _read(
    conn: Connection, now: datetime, window_s: float, points: int, ports: list[tuple[str, str]]
) -> dict[tuple[str, str], Series]:
    """DOM and BER of ``ports`` over the last ``window_s``, in ``points`` buckets per port."""
    since = now - timedelta(seconds=window_s)
    bucket = max(1.0, window_s / points)
    series: dict[tuple[str, str], Series] = {}
    keys = ([sw for sw, _ in ports], [p for _, p in ports])
    for r in await conn.fetch(_DOM_SQL, since, now, bucket, *keys):
        s = series.setdefault((r["switch"], r["port"]), Series())
        if r["rx"] is not None:
            s.rx_ts.append(float(r["t"]))
            s.rx.append(float(r["rx"]))
        if r["bias"] is not None:
            s.bias_ts.append(float(r["t"]))
            s.bias.append(float(r["bias"]))
        s.rx_warn, s.rx_crit, s.bias_crit = r["rx_warn"], r["rx_crit"], r["bias_crit"]
    for r in await conn.fetch(_BER_SQL, since, now, bucket, *keys):
        s = series.setdefault((r["switch"], r["port"]), Series())
        s.ber_ts.append(float(r["t"]))
        s.log_ber.append(float(r["log_ber"]))
    return series


def _near(slope: float | None, icpt: float | None, rel: float, threshold: float, falling: bool, horizon: float) -> bool:
    """Whether a least-squares line (value = icpt + slope x rel) may reach ``threshold`` soon."""
    if slope is None or icpt is None:
        return False
    return not _hopeless(
        [rel - 1.0, rel], [icpt + slope * (rel - 1.0), icpt + slope * rel], threshold, falling, horizon
    )


async def link_health(conn: Connection, now: datetime, limits: LinkLimits) -> list[PortHealth]:
    """Every port with optics or FEC data in the window, with its estimate (unranked).

    One pass over the window (analyzer/link_summary.py, mostly from the rollup) gives each port's
    latest values and least-squares lines; only the ports whose line may reach a threshold
    (:func:`_hopeless`) get the bucketed series at both scales and the robust fits. The others are
    listed with their latest values and no estimate.
    """
    since = now - timedelta(seconds=limits.window_s)
    latest: dict[tuple[str, str], Series] = {}
    candidates: set[tuple[str, str]] = set()
    horizon = limits.horizon_s
    dom, ber = await summaries(conn, since, now)
    for r in dom:
        key = (r["switch"], r["port"])
        s = latest[key] = Series(rx_warn=r["rx_warn"], rx_crit=r["rx_crit"], bias_crit=r["bias_crit"])
        if r["rx"] is not None:
            s.rx_ts, s.rx = [r["t"]], [r["rx"]]
        if r["bias"] is not None:
            s.bias_ts, s.bias = [r["t"]], [r["bias"]]
        rx_crit = limits.rx_low_critical_dbm if r["rx_crit"] is None else r["rx_crit"]
        bias_crit = limits.bias_high_critical_ma if r["bias_crit"] is None else r["bias_crit"]
        if _near(r["rx_slope"], r["rx_icpt"], r["rel"], rx_crit, True, horizon) or _near(
            r["bias_slope"], r["bias_icpt"], r["rel"], bias_crit, False, horizon
        ):
            candidates.add(key)
    ber_crit = math.log10(limits.pre_fec_ber_critical)
    for r in ber:
        key = (r["switch"], r["port"])
        s = latest.setdefault(key, Series())
        s.ber_ts, s.log_ber = [r["t"]], [r["log_ber"]]
        if _near(r["ber_slope"], r["ber_icpt"], r["rel"], ber_crit, False, horizon):
            candidates.add(key)
    ports = sorted(candidates)
    series = await _read(conn, now, limits.window_s, _BUCKETS, ports) if ports else {}
    recent = await _read(conn, now, limits.window_s / SHORT, _SHORT_BUCKETS, ports) if ports else {}
    flr: dict[tuple[str, str], tuple[float | None, float | None]] = {}
    flr_since = now - timedelta(seconds=limits.flr_window_s)
    for r in await conn.fetch(_BINS_SQL, flr_since, now):
        flr[(r["switch"], r["port"])] = (_flr(r["first_bins"], r["last_bins"]), r["pre_fec_ber"])
        latest.setdefault((r["switch"], r["port"]), Series())
    return [
        judge(key, series.get(key, s), flr.get(key, (None, None)), limits, recent.get(key))
        for key, s in sorted(latest.items())
    ]


def _flr(first: list[int] | None, last: list[int] | None) -> float | None:
    if first is None or last is None or len(first) != BINS or len(last) != BINS:
        return None
    delta = [from_int8(b) - from_int8(a) for a, b in zip(first, last, strict=True)]
    if any(d < 0 for d in delta):
        return None  # counters cleared in the window
    return predicted_flr(delta)


def judge(
    key: tuple[str, str],
    s: Series,
    flr: tuple[float | None, float | None],
    limits: LinkLimits,
    recent: Series | None = None,
) -> PortHealth:
    """One port's estimate: ``s`` the whole window, ``recent`` its last ``1/SHORT`` (finer buckets,
    so a fast degradation is seen before it fills the window); ``flr``: (predicted FLR, latest
    pre-FEC BER) or Nones. The earliest confident time to threshold of either scale wins."""
    rx_crit = s.rx_crit if s.rx_crit is not None else limits.rx_low_critical_dbm
    bias_crit = s.bias_crit if s.bias_crit is not None else limits.bias_high_critical_ma
    candidates: list[tuple[float, float, str]] = []
    evidence: dict[str, Any] = {
        "rx_power_dbm": s.rx[-1] if s.rx else None,
        "rx_low_critical_dbm": rx_crit,
        "rx_low_warning_dbm": s.rx_warn,
        "thresholds_from": "module" if s.rx_crit is not None else "configured",
        "laser_bias_ma": s.bias[-1] if s.bias else None,
        "bias_high_critical_ma": bias_crit,
        "pre_fec_ber": flr[1] if flr[1] is not None else (10 ** s.log_ber[-1] if s.log_ber else None),
        "pre_fec_ber_critical": limits.pre_fec_ber_critical,
        "predicted_flr": flr[0],
    }
    scales = [(s, limits.window_s)] + ([(recent, limits.window_s / SHORT)] if recent is not None else [])
    for scale, (ser, window_s) in enumerate(scales):
        for name, ts, ys, threshold, falling in (
            ("rx_power", ser.rx_ts, ser.rx, rx_crit, True),
            ("laser_bias", ser.bias_ts, ser.bias, bias_crit, False),
            ("pre_fec_ber", ser.ber_ts, ser.log_ber, math.log10(limits.pre_fec_ber_critical), False),
        ):
            if _hopeless(ts, ys, threshold, falling, limits.horizon_s):
                continue
            tr = trend(ts, ys, window_s)
            if tr is None:
                continue
            if scale == 0 or f"{name}_slope_per_hour" not in evidence:
                evidence[f"{name}_slope_per_hour"] = _per_hour(tr, name)
            ttt = time_to_threshold(tr, threshold, falling=falling)
            if ttt is not None and tr.confidence >= limits.min_confidence:
                candidates.append((ttt, tr.confidence, name))
    h = PortHealth(key[0], key[1], evidence=evidence)
    if candidates:
        ttt, confidence, name = min(candidates)
        h.time_to_failure_s, h.confidence, h.basis = round(ttt, 1), confidence, name
    return h


#: The robust fit is skipped when least squares puts the threshold this many horizons away, or
#: the series moves away from it: O(n) instead of O(n²) for the healthy ports, nearly all of them.
PREFILTER_HORIZONS = 10.0


def _hopeless(ts: list[float], ys: list[float], threshold: float, falling: bool, horizon_s: float) -> bool:
    """Whether a plain least-squares line says this series is nowhere near its threshold."""
    fit = least_squares(ts, ys)
    if fit is None:
        return len(ts) < 3
    if (fit.slope >= 0) if falling else (fit.slope <= 0):
        near = (ys[-1] <= threshold) if falling else (ys[-1] >= threshold)
        return not near
    return (threshold - fit.at(ts[-1])) / fit.slope > PREFILTER_HORIZONS * horizon_s


def _per_hour(tr: Trend, name: str) -> float:
    # pre-FEC BER is fitted as log10: its slope is decades per hour
    return round(tr.fit.slope * 3600, 6 if name == "pre_fec_ber" else 4)


def by_link(fabric: Fabric, ports: list[PortHealth]) -> dict[tuple[str, str], PortHealth]:
    """The worst end of each link (the earliest time to failure, then the first), by naming end."""
    out: dict[tuple[str, str], PortHealth] = {}
    for h in ports:
        end = link_end(fabric, h.switch, h.port)
        have = out.get(end)
        if have is None or _rank(h) < _rank(have):
            out[end] = h
    return out


def _rank(h: PortHealth) -> tuple[float, float]:
    return (math.inf if h.time_to_failure_s is None else h.time_to_failure_s, -h.confidence)


def peer_of(fabric: Fabric, switch: str, port: str) -> str | None:
    """``node:port`` at the other end of a cabled port."""
    peer = fabric.peer(Endpoint(switch, port))
    return None if peer is None else f"{peer.node}:{peer.port}"


async def check_link_health(conn: Connection, ctx: CheckContext) -> list[Finding]:
    """``link_degrading`` for each link predicted to fail within the horizon."""
    limits = LinkLimits.of(ctx.thresholds)
    found: list[Finding] = []
    for end, h in sorted(by_link(ctx.fabric, await link_health(conn, ctx.now, limits)).items()):
        ttf = h.time_to_failure_s
        if ttf is None or ttf > limits.horizon_s:
            continue
        measured = f"{h.switch}:{h.port}"
        summary = (
            f"link {end[0]}:{end[1]} predicted to fail in {_duration(ttf)} "
            f"({h.basis} trend at {measured}, {h.confidence:.0%} sure)"
        )
        details = {
            "time_to_failure_s": ttf,
            "confidence": h.confidence,
            "basis": h.basis,
            "measured_at": measured,
            "peer": peer_of(ctx.fabric, *end),
            "evidence": h.evidence,
        }
        scope = blast_radius(ctx.fabric, ports=[end])
        found.append(Finding("link_degrading", f"{end[0]}:{end[1]}", "warning", summary, scope, details, ctx.now))
    return found


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
