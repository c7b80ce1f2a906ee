"""FABRIC.md's stability and bandwidth models (its table, its two efficiency points, input checks),
and the SLO window arithmetic: outages against windows, multi-window burn alerts."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzer.objectives import burn_alert, covered_s, overlap_s
from analyzer.slo import K_BANDWIDTH, SloInputError, efficiency_loss, p_interrupt, scaling_efficiency
from fabric.errors import FabricmonError


@pytest.mark.parametrize(
    ("availability", "gpus", "expected"),
    [(0.999, 1000, 0.632), (0.999, 8000, 0.9997), (0.9999, 8000, 0.551)],
)
def test_fabric_md_table(availability: float, gpus: int, expected: float) -> None:
    assert p_interrupt(availability, gpus) == pytest.approx(expected, abs=5e-4)


def test_months_compound() -> None:
    one = p_interrupt(0.9999, 8000)
    assert p_interrupt(0.9999, 8000, months=2) == pytest.approx(1 - (1 - one) ** 2)
    assert p_interrupt(0.9999, 8000, months=0.5) == pytest.approx(1 - math.sqrt(1 - one))
    assert p_interrupt(1.0, 100_000) == 0.0


def test_precision_near_one() -> None:
    # 1 - (1 - 1e-12)^1 must not cancel to 0 or to a rounding artefact
    assert p_interrupt(1 - 1e-12, 1) == pytest.approx(1e-12, rel=1e-3)


@given(st.floats(0.5, 0.999999), st.integers(1, 100_000), st.integers(1, 100_000))
def test_more_gpus_never_lower_the_risk(availability: float, n: int, m: int) -> None:
    small, large = sorted((n, m))
    assert 0.0 <= p_interrupt(availability, small) <= p_interrupt(availability, large) <= 1.0


def test_efficiency_points() -> None:
    assert math.isclose(K_BANDWIDTH, 2.14)
    assert scaling_efficiency(5.0) == pytest.approx(0.70, abs=0.005)
    assert scaling_efficiency(20.0) == pytest.approx(0.90, abs=0.005)
    assert scaling_efficiency(0.0) == 0.0
    assert scaling_efficiency(1e9) == pytest.approx(1.0)


def test_efficiency_loss() -> None:
    assert efficiency_loss(20.0, 20.0) == 0.0
    assert efficiency_loss(20.0, 40.0) == 0.0
    assert efficiency_loss(20.0, 0.0) == 1.0
    expected = 1 - scaling_efficiency(5.0) / scaling_efficiency(20.0)
    assert efficiency_loss(20.0, 5.0) == pytest.approx(expected)
    assert 0.2 < efficiency_loss(20.0, 5.0) < 0.25


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: p_interrupt(1.5, 8000), r"availability must be in \(0, 1\], got 1.5"),
        (lambda: p_interrupt(0.0, 8000), r"availability must be in \(0, 1\]"),
        (lambda: p_interrupt(float("nan"), 8000), r"availability must be in \(0, 1\]"),
        (lambda: p_interrupt(0.999, 0), r"gpus must be an integer >= 1, got 0"),
        (lambda: p_interrupt(0.999, 10, months=0), r"months must be a finite number > 0"),
        (lambda: p_interrupt(0.999, 10, months=float("inf")), r"months must be a finite number > 0"),
        (lambda: scaling_efficiency(-1.0), r"bandwidth must be >= 0 GB/s"),
        (lambda: scaling_efficiency(5.0, k=0.0), r"k must be > 0 GB/s"),
        (lambda: efficiency_loss(0.0, 5.0), r"design bandwidth must be > 0 GB/s"),
    ],
)
def test_bad_inputs(call: object, message: str) -> None:
    with pytest.raises(SloInputError, match=message) as info:
        call()  # type: ignore[operator]
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, FabricmonError)


# --- outages against SLO windows (analyzer/objectives.py) ------------------------------------------

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


spans = st.lists(
    st.tuples(st.floats(-5000, 5000, allow_nan=False), st.floats(0, 3000, allow_nan=False)).map(
        lambda t: (at(t[0]), at(t[0] + t[1]))
    ),
    max_size=8,
)
bounds = st.tuples(st.floats(-6000, 6000, allow_nan=False), st.floats(0, 8000, allow_nan=False))


@given(st.floats(-5000, 5000, allow_nan=False), st.floats(0, 3000, allow_nan=False), bounds)
def test_an_outage_counts_the_part_that_overlaps_the_window(
    start: float, length: float, window: tuple[float, float]
) -> None:
    since, until = window[0], window[0] + window[1]
    got = overlap_s(at(start), at(start + length), at(since), at(until))
    assert got == pytest.approx(max(0.0, min(start + length, until) - max(start, since)), abs=1e-6)
    assert 0.0 <= got <= until - since + 1e-6


@given(spans, bounds, st.floats(0, 1, allow_nan=False))
def test_down_time_in_a_window_is_bounded_and_adds_up_over_a_split(
    down: list[tuple[datetime, datetime]], window: tuple[float, float], cut: float
) -> None:
    since, until = at(window[0]), at(window[0] + window[1])
    whole = covered_s(down, since, until)
    assert -1e-6 <= whole <= (until - since).total_seconds() + 1e-6
    assert whole <= sum(overlap_s(s, e, since, until) for s, e in down) + 1e-6  # overlaps count once
    middle = since + (until - since) * cut
    assert covered_s(down, since, middle) + covered_s(down, middle, until) == pytest.approx(whole, abs=1e-5)
    wider = covered_s(down, since - timedelta(seconds=100), until + timedelta(seconds=100))
    assert wider >= whole - 1e-6  # a wider window never sees less


def test_overlapping_reports_of_one_port_count_once() -> None:
    assert covered_s([(at(0), at(100)), (at(50), at(150)), (at(300), at(310))], at(0), at(1000)) == 160.0
    assert covered_s([], at(0), at(10)) == 0.0


@pytest.mark.parametrize(
    ("burns", "alert"),
    [
        ({"5m": 20.0, "30m": 20.0, "1h": 20.0, "6h": 20.0}, "page"),
        ({"5m": 0.0, "30m": 13.0, "1h": 16.0, "6h": 3.0}, None),  # it stopped: the 5 min window says so
        ({"5m": 20.0, "30m": 20.0, "1h": 10.0, "6h": 3.0}, None),  # a short spike does not page
        ({"5m": 20.0, "30m": 13.0, "1h": 13.0, "6h": 10.0}, "ticket"),
        ({"5m": 0.0, "30m": 5.0, "1h": 13.0, "6h": 10.0}, None),  # slow burn already over
        ({"5m": 14.4, "30m": 14.4, "1h": 14.4, "6h": 6.0}, None),  # "faster than": equal is not
    ],
)
def test_multi_window_burn_alerts(burns: dict[str, float], alert: str | None) -> None:
    assert burn_alert(burns, fast=14.4, slow=6.0) == alert


@given(st.dictionaries(st.sampled_from(["5m", "30m", "1h", "6h"]), st.floats(0, 100, allow_nan=False)))
def test_a_page_needs_both_windows_burning(burns: dict[str, float]) -> None:
    alert = burn_alert(burns, fast=14.4, slow=6.0)
    if alert == "page":
        assert burns["1h"] > 14.4 and burns["5m"] > 14.4
    elif alert == "ticket":
        assert burns["6h"] > 6.0 and burns["30m"] > 6.0
    else:
        assert not (burns.get("1h", 0) > 14.4 and burns.get("5m", 0) > 14.4)
        assert not (burns.get("6h", 0) > 6.0 and burns.get("30m", 0) > 6.0)
