"""The collector process's garbage-collector settings (collector/gc_tuning.py)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from collector import gc_tuning


@pytest.fixture
def unfrozen() -> Iterator[None]:
    before = gc.get_threshold()
    yield None
    gc.unfreeze()
    gc.set_threshold(*before)


async def test_a_tuned_collector_collects_less_often_and_freezes_its_state_once_settled(unfrozen: None) -> None:
    before = gc.get_threshold()
    kept = [[i] for i in range(1000)]  # long-lived state, as a fabric's ports are
    async with gc_tuning.tuned(0.05):
        assert gc.get_threshold() == (gc_tuning.GEN0_THRESHOLD, *before[1:])
        for _ in range(200):
            if gc.get_freeze_count() >= len(kept):
                break
            await asyncio.sleep(0.05)
        assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == before  # CPython's again


async def test_leaving_before_it_settled_freezes_nothing(unfrozen: None) -> None:
    async with gc_tuning.tuned(3600):
        await asyncio.sleep(0)
    assert gc.get_freeze_count() == 0


def test_settled_is_two_intervals_and_at_least_30_s() -> None:
    assert gc_tuning.settle_time(1.0) == 30.0 and gc_tuning.settle_time(30.0) == 60.0
