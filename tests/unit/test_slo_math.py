"""FABRIC.md's stability and bandwidth models: its table, its two efficiency points, input checks."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
