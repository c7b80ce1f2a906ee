"""The link-health judgment of one port (analyzer/link_health.judge): the two trend scales, and the
module's thresholds against the configured ones."""

from __future__ import annotations

import random

import pytest

from analyzer.config import ThresholdsConfig
from analyzer.link_health import SHORT, LinkLimits, Series, judge

LIMITS = LinkLimits.of(ThresholdsConfig())  # 6 h window, 0.6 confidence, -10 dBm configured


def series(window_s: float, points: int, rx_at: object, crit: float | None = -10.0) -> Series:
    rng = random.Random(points)
    s = Series(rx_crit=crit)
    for i in range(points):
        t = -window_s + (i + 0.5) * window_s / points
        s.rx_ts.append(t)
        s.rx.append(rx_at(t) + rng.uniform(-0.05, 0.05))  # type: ignore[operator]
    return s


def hockey(t: float) -> float:
    """Flat at -2 dBm for 5 h, then falling 4 dB/h for the last hour (now: -6 dBm)."""
    return -2.0 - 4.0 * max(0.0, (t + 3600.0) / 3600.0)


def test_a_fast_fall_shows_in_the_recent_scale_before_it_fills_the_window() -> None:
    whole = series(LIMITS.window_s, 60, hockey)
    alone = judge(("sw", "p"), whole, (None, None), LIMITS)
    assert alone.time_to_failure_s is None or alone.time_to_failure_s > 3 * 3600  # the window lags
    recent = series(LIMITS.window_s / SHORT, 30, hockey)
    both = judge(("sw", "p"), whole, (None, None), LIMITS, recent)
    assert both.basis == "rx_power" and both.confidence >= 0.6
    # 4 dB to go at 4 dB/h: 1 h; the recent scale still half-lags a bend (Theil-Sen over 2 h, half
    # of it flat: ~2 dB/h), so about 2.5 h, where the whole window alone says nothing
    assert both.time_to_failure_s is not None and both.time_to_failure_s < 3 * 3600


def test_the_modules_threshold_wins_over_the_configured_one() -> None:
    def fall(t: float) -> float:
        return -5.0 - 0.5 * t / 3600.0  # 0.5 dB/h, from -2 dBm 6 h ago to -5 dBm now

    own = judge(("sw", "p"), series(LIMITS.window_s, 60, fall, crit=-7.0), (None, None), LIMITS)
    none = judge(("sw", "p"), series(LIMITS.window_s, 60, fall, crit=None), (None, None), LIMITS)
    assert own.time_to_failure_s == pytest.approx(4 * 3600, rel=0.05) and own.evidence["thresholds_from"] == "module"
    assert none.time_to_failure_s == pytest.approx(10 * 3600, rel=0.05)
    assert none.evidence["thresholds_from"] == "configured" and none.evidence["rx_low_critical_dbm"] == -10.0


def test_no_series_is_no_estimate() -> None:
    h = judge(("sw", "p"), Series(), (None, None), LIMITS)
    assert h.time_to_failure_s is None and h.confidence == 0.0 and h.evidence["rx_power_dbm"] is None


def test_a_series_nowhere_near_its_threshold_skips_the_robust_fit() -> None:
    def creep(t: float) -> float:
        return -2.0 - 0.001 * t / 3600.0  # 1 mdB/h: 8,000 h from -10 dBm, past 10 horizons

    def rising(t: float) -> float:
        return -2.0 + 0.5 * t / 3600.0  # moving away from a low threshold

    for shape in (creep, rising):
        h = judge(("sw", "p"), series(LIMITS.window_s, 60, shape), (None, None), LIMITS)
        assert h.time_to_failure_s is None and "rx_power_slope_per_hour" not in h.evidence
    near = judge(("sw", "p"), series(LIMITS.window_s, 60, lambda t: -9.0 - 0.5 * t / 3600.0), (None, None), LIMITS)
    assert near.evidence["rx_power_slope_per_hour"] == pytest.approx(-0.5, abs=0.05)
    assert near.time_to_failure_s == pytest.approx(2 * 3600, rel=0.1)  # -9 dBm now, 1 dB to go at 0.5 dB/h
