"""Predicted FLR from FEC bins and robust trends (analyzer/link_trend.py), against worked examples."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzer.link_trend import least_squares, predicted_flr, theil_sen, time_to_threshold, trend


def test_flr_of_a_decade_per_bin() -> None:
    # S_k = 10^(16-k) for k = 1..15 out of exactly 10^18 codewords: CER_k = 10^(-2-k), so the
    # fit is a = -2, b = -1 and the tail is 10^(-2-16) / (1 - 10^-1) = 1e-18 / 0.9.
    bins = [10 ** (16 - k) for k in range(1, 16)]
    bins.insert(0, 10**18 - sum(bins))
    assert bins[0] == 998_888_888_888_888_890
    assert predicted_flr(bins) == pytest.approx(1e-18 / 0.9, rel=1e-9, abs=0)


def test_flr_fits_only_the_bins_that_counted() -> None:
    # 10^9 codewords; S2 = 1e5, S4 = 1e4, S6 = 1e3: log10 CER = -4, -5, -6 at k = 2, 4, 6, so
    # b = -0.5, a = -3; tail = 10^(-3 - 8) / (1 - 10^-0.5) = 1e-11 / 0.6837722 = 1.462475e-11.
    bins = [0] * 16
    bins[2], bins[4], bins[6] = 100_000, 10_000, 1_000
    bins[0] = 10**9 - 111_000
    assert predicted_flr(bins) == pytest.approx(1.462475e-11, rel=1e-6, abs=0)
    # interleaving 2: 1 - (1 - CER)^2
    cer = 1e-11 / (1 - 10**-0.5)
    assert predicted_flr(bins, interleave=2) == pytest.approx(2 * cer - cer**2, rel=1e-9, abs=0)


@pytest.mark.parametrize(
    "bins",
    [
        [1000] + [0] * 15,  # no errors at all: nothing to extrapolate
        [1000, 5] + [0] * 14,  # one bin: no line
        [1000, 1, 2, 4] + [0] * 12,  # rising: not a decaying tail
        [0] * 16,
        [1] * 15,  # not a histogram
    ],
)
def test_no_prediction_without_evidence(bins: list[int]) -> None:
    assert predicted_flr(bins) is None


def test_a_degrading_link_predicts_more_loss() -> None:
    healthy = [10**12, 10**6, 10**3, 1] + [0] * 12
    sick = [10**12, 10**9, 10**8, 10**7, 10**6] + [0] * 11
    a, b = predicted_flr(healthy), predicted_flr(sick)
    assert a is not None and b is not None and b > 1e6 * a


def test_least_squares_worked_example() -> None:
    fit = least_squares([1, 2, 3], [2, 4, 7])  # mean x 2, mean y 13/3; sxy = 5, sxx = 2
    assert fit is not None and fit.slope == pytest.approx(2.5) and fit.intercept == pytest.approx(13 / 3 - 5)


def test_theil_sen_ignores_a_burst() -> None:
    ts = [float(t) for t in range(11)]
    ys = [5 - 0.5 * t for t in ts]
    ys[5] = 40.0  # a FEC burst, a spike
    fit = theil_sen(ts, ys)
    assert fit is not None and fit.slope == pytest.approx(-0.5) and fit.intercept == pytest.approx(5.0)


def test_time_to_threshold_from_the_last_point() -> None:
    ts = [0.0, 600.0, 1200.0, 1800.0, 2400.0, 3000.0, 3600.0]
    rx = [-2.0 - t / 3600 for t in ts]  # 1 dB per hour, -3 dBm at the last point
    tr = trend(ts, rx, 3600.0)
    assert tr is not None and tr.confidence == pytest.approx(7 / 30, abs=1e-3)  # an exact line, few points
    assert time_to_threshold(tr, -10.0, falling=True) == pytest.approx(7 * 3600)  # 7 dB to go
    assert time_to_threshold(tr, -2.5, falling=True) == 0.0  # crossed already
    assert time_to_threshold(tr, -1.0, falling=False) is None  # moving away from it


def test_a_step_then_flat_is_not_a_trend() -> None:
    ts = [float(t * 60) for t in range(60)]
    rx = [-2.0 if t < 5 else -4.0 for t in range(60)]  # a dirty connector: a step, then stable
    tr = trend(ts, rx, 3600.0)
    assert tr is not None and tr.fit.slope == 0.0
    assert time_to_threshold(tr, -10.0, falling=True) is None


def test_short_windows_are_less_sure() -> None:
    ts = [float(t) for t in range(10)]
    ys = [-t / 10 for t in range(10)]
    long = trend([t * 400 for t in ts], ys, 3600.0)
    short = trend(ts, ys, 3600.0)
    assert long is not None and short is not None and short.confidence < 0.01 < long.confidence


@given(
    slope=st.floats(-5, 5).filter(lambda s: abs(s) > 1e-3),
    intercept=st.floats(-50, 50),
    n=st.integers(3, 80),
)
def test_theil_sen_recovers_an_exact_line(slope: float, intercept: float, n: int) -> None:
    ts = [float(i * 30) for i in range(n)]
    tr = trend(ts, [intercept + slope * t for t in ts], 30.0 * (n - 1))
    assert tr is not None and math.isclose(tr.fit.slope, slope, rel_tol=1e-6, abs_tol=1e-9)
    assert tr.confidence == pytest.approx(min(1.0, min(n, 60) / 30), abs=1e-3)  # every pair agrees, full window


@pytest.mark.parametrize("n", [12, 30, 60])
def test_noise_alone_is_never_confident(n: int) -> None:
    rng = random.Random(n)
    ts = [float(t * 10) for t in range(n)]
    worst = 0.0
    for _ in range(300):
        tr = trend(ts, [-2.0 + rng.uniform(-0.05, 0.05) for _ in ts], ts[-1])
        assert tr is not None
        worst = max(worst, tr.confidence)
    assert worst < 0.6
    fall = trend(ts, [-2.0 - 1.0 * t / ts[-1] + rng.uniform(-0.05, 0.05) for t in ts], ts[-1])
    assert fall is not None and fall.confidence > (0.6 if n >= 30 else 0.35)  # 1 dB over the window stands out
