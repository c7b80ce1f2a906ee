"""The demo's pace: its default interval grows with the fabric, and its time limits with the interval."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from demo.runner import STEP_INTERVALS, DemoOptions, auto_interval


def test_small_fabrics_sample_every_two_seconds_large_ones_slower() -> None:
    assert auto_interval(512) == auto_interval(1024) == 2.0
    assert auto_interval(2048) == 8.0
    assert auto_interval(16384) == 64.0


@given(st.integers(1, 65536), st.floats(0.5, 600))
def test_every_step_gets_enough_intervals(gpus: int, interval: float) -> None:
    assert auto_interval(gpus) >= 2.0
    opts = DemoOptions(gpus=gpus, interval_s=interval)
    assert opts.timeout_s >= max(opts.step_timeout_s, STEP_INTERVALS * interval)
